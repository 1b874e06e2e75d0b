// Progress on the console. On a terminal: a live line redrawn in place while
// training (epoch, a bar, iterations, loss, samples/s, ETA, the last test
// values) and a "testing" line during test passes. Elsewhere (a file, a pipe,
// a CI log): the same information as a plain line every `plain_every_secs`.
// Either way one line per test pass and one per epoch.
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
  char buf[96];
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

std::string bar(double fraction, int width) {
  const int full = static_cast<int>(fraction * width + 0.5);
  std::string b = "[";
  for (int i = 0; i < width; ++i) b += i < full ? '#' : '.';
  return b + "]";
}

class Console : public trainyard::Callback {
 public:
  Console(double every, bool live, double plain_every)
      : every_(every), live_(live), plain_every_(plain_every) {}

  void before_epoch(trainyard::Loop& loop) override {
    epoch_start_ = last_draw_ = last_plain_ = Clock::now();
    samples_ = 0;
    start_position_ = loop.position();
    loss_sum_ = 0, loss_count_ = 0;
  }
  void after_train_iter(trainyard::Loop& loop, const trainyard::StepResult& r) override {
    samples_ += r.batch.size();
    loss_sum_ += r.loss.item<double>();
    ++loss_count_;
    const auto now = Clock::now();
    const bool draw = live_ && seconds(last_draw_, now) >= every_;
    const bool plain = !live_ && plain_every_ > 0 && seconds(last_plain_, now) >= plain_every_;
    if (!draw && !plain) return;
    const double elapsed = seconds(epoch_start_, now);
    const int64_t done = loop.position() - start_position_, total = loop.iterations_per_epoch() - start_position_;
    const double eta = done > 0 ? elapsed / double(done) * double(total - done) : 0;
    const double fraction = loop.iterations_per_epoch() > 0 ? double(loop.position()) / double(loop.iterations_per_epoch()) : 0;
    char line[512];
    std::snprintf(line, sizeof line, "epoch %lld/%lld %s %lld/%lld %3.0f%% loss %.4f %.0f samples/s ETA %s%s",
                  (long long)loop.epoch() + 1, (long long)loop.epochs(), bar(fraction, 20).c_str(),
                  (long long)loop.position(), (long long)loop.iterations_per_epoch(), 100 * fraction,
                  loss_sum_ / double(loss_count_), elapsed > 0 ? double(samples_) / elapsed : 0.0,
                  duration_text(eta).c_str(), last_test_.empty() ? "" : (" |" + last_test_).c_str());
    if (draw) {
      std::printf("\r\033[K%s", line);
      last_draw_ = now;
    } else {
      std::printf("%s\n", line);
      last_plain_ = now;
    }
    std::fflush(stdout);
    loss_sum_ = 0, loss_count_ = 0;
  }
  void before_test(trainyard::Loop& loop) override {
    if (!live_) return;
    std::printf("\r\033[Kepoch %lld/%lld testing...", (long long)(loop.position() ? loop.epoch() + 1 : loop.epoch()),
                (long long)loop.epochs());
    std::fflush(stdout);
  }
  void after_test(trainyard::Loop& loop, const trainyard::MeterValues& values) override {
    clear_line();
    last_test_ = values_text(values);
    std::printf("epoch %lld/%lld iteration %lld test:%s\n", (long long)(loop.position() ? loop.epoch() + 1 : loop.epoch()),
                (long long)loop.epochs(), (long long)loop.iteration(), last_test_.c_str());
    std::fflush(stdout);
  }
  void after_epoch(trainyard::Loop& loop) override {
    clear_line();
    double elapsed = seconds(epoch_start_, Clock::now());
    trainyard::MeterValues train;
    for (const auto& [k, v] : loop.values())
      if (k.rfind("train_", 0) == 0) train[k] = v;
    std::printf("epoch %lld/%lld done in %s (%.0f samples/s):%s\n", (long long)loop.epoch(), (long long)loop.epochs(),
                duration_text(elapsed).c_str(), elapsed > 0 ? double(samples_) / elapsed : 0.0,
                values_text(train).c_str());
    std::fflush(stdout);
  }

 private:
  static double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
  void clear_line() {
    if (live_) std::printf("\r\033[K");
  }
  double every_;
  bool live_;
  double plain_every_;
  Clock::time_point epoch_start_, last_draw_, last_plain_;
  int64_t samples_ = 0, start_position_ = 0;
  double loss_sum_ = 0;
  int64_t loss_count_ = 0;
  std::string last_test_;
};

}  // namespace

trainyard::Schema schema() {
  trainyard::Schema s;
  s.add("refresh_secs", 0.5, "how often the live line is redrawn on a terminal").min(0.0);
  s.add("progress", "auto", "the live line: auto (only on a terminal), always, never").one_of({"auto", "always", "never"});
  s.add("plain_every_secs", 30.0, "without the live line: a plain progress line this often; 0: none").min(0.0);
  return s;
}

std::shared_ptr<trainyard::Callback> make(const trainyard::Options& options) {
  const auto& mode = options.get<std::string>("progress");
  bool live = mode == "always" || (mode == "auto" && ::isatty(STDOUT_FILENO));
  return std::make_shared<Console>(options.get<double>("refresh_secs"), live, options.get<double>("plain_every_secs"));
}

}  // namespace console
