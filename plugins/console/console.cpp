// A progress line while training (epoch, iteration, loss, samples/s, ETA),
// redrawn in place on a terminal and left out when output goes to a file or
// a pipe; one line per test pass and per epoch either way.
#include "console.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace console {
namespace {

using Clock = std::chrono::steady_clock;

std::string values_text(const trainyard::MeterValues& values) {
  std::string out;
  char buf[64];
  for (const auto& [k, v] : values) {
    std::snprintf(buf, sizeof buf, " %s=%.4f", k.c_str(), v);
    out += buf;
  }
  return out;
}

std::string duration_text(double seconds) {
  char buf[32];
  long s = static_cast<long>(seconds + 0.5);
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

class Console : public trainyard::Callback {
 public:
  Console(double every, bool progress) : every_(every), progress_(progress) {}

  void before_epoch(trainyard::Loop& loop) override {
    epoch_start_ = last_draw_ = Clock::now();
    samples_ = 0;
    start_position_ = loop.position();
    loss_sum_ = 0, loss_count_ = 0;
  }
  void after_train_iter(trainyard::Loop& loop, const trainyard::StepResult& r) override {
    samples_ += r.batch.size();
    loss_sum_ += r.loss.item<double>();
    ++loss_count_;
    if (!progress_) return;
    auto now = Clock::now();
    if (std::chrono::duration<double>(now - last_draw_).count() < every_) return;
    last_draw_ = now;
    double elapsed = std::chrono::duration<double>(now - epoch_start_).count();
    int64_t done = loop.position() - start_position_, total = loop.iterations_per_epoch() - start_position_;
    double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total - done) : 0;
    std::printf("\r\033[Kepoch %lld/%lld [%lld/%lld] loss %.4f %.0f samples/s ETA %s", (long long)loop.epoch() + 1,
                (long long)loop.epochs(), (long long)loop.position(), (long long)loop.iterations_per_epoch(),
                loss_sum_ / static_cast<double>(loss_count_), static_cast<double>(samples_) / elapsed,
                duration_text(eta).c_str());
    std::fflush(stdout);
    loss_sum_ = 0, loss_count_ = 0;
  }
  void after_test(trainyard::Loop& loop, const trainyard::MeterValues& values) override {
    clear_line();
    std::printf("epoch %lld/%lld iteration %lld test:%s\n", (long long)(loop.position() ? loop.epoch() + 1 : loop.epoch()),
                (long long)loop.epochs(), (long long)loop.iteration(), values_text(values).c_str());
    std::fflush(stdout);
  }
  void after_epoch(trainyard::Loop& loop) override {
    clear_line();
    double elapsed = std::chrono::duration<double>(Clock::now() - epoch_start_).count();
    trainyard::MeterValues train;
    for (const auto& [k, v] : loop.values())
      if (k.rfind("train_", 0) == 0) train[k] = v;
    std::printf("epoch %lld/%lld done in %s (%.0f samples/s):%s\n", (long long)loop.epoch(), (long long)loop.epochs(),
                duration_text(elapsed).c_str(), static_cast<double>(samples_) / elapsed, values_text(train).c_str());
    std::fflush(stdout);
  }

 private:
  void clear_line() {
    if (progress_) std::printf("\r\033[K");
  }
  double every_;
  bool progress_;
  Clock::time_point epoch_start_, last_draw_;
  int64_t samples_ = 0, start_position_ = 0;
  double loss_sum_ = 0;
  int64_t loss_count_ = 0;
};

}  // namespace

trainyard::Schema schema() {
  trainyard::Schema s;
  s.add("refresh_secs", 0.5, "how often the progress line is redrawn").min(0.0);
  s.add("progress", "auto", "draw the progress line: auto (only on a terminal), always, never")
      .one_of({"auto", "always", "never"});
  return s;
}

std::shared_ptr<trainyard::Callback> make(const trainyard::Options& options) {
  const auto& mode = options.get<std::string>("progress");
  bool progress = mode == "always" || (mode == "auto" && ::isatty(STDOUT_FILENO));
  return std::make_shared<Console>(options.get<double>("refresh_secs"), progress);
}

}  // namespace console
