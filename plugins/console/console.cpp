// Progress on the console. On a terminal: a live line redrawn in place while
// training (epoch, a bar, iterations, loss, samples/s, the epoch's and the
// run's ETA, the last test values) and while testing (batches, ETA), fitted
// to the terminal's width, read at every redraw, so a resized terminal gets
// lines that fit from the next redraw on. Elsewhere (a file, a pipe, a CI
// log): the same information as a plain line every `plain_every_secs`.
// Either way one line per test pass and one per epoch. Only rank 0 prints.
#include "console.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace console {
namespace {

using Clock = std::chrono::steady_clock;

std::string values_text(const trainyard::MeterValues& values) {
  std::string out;
  char buf[96];
  for (const auto& [k, v] : values) {
    std::snprintf(buf, sizeof buf, " %s=%.4g", k.c_str(), v);
    out += buf;
  }
  return out;
}

std::string duration_text(double seconds) {
  char buf[32];
  long s = static_cast<long>(seconds + 0.5);
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

std::string format(const char* pattern, double a, double b = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, pattern, a, b);
  return buf;
}

}  // namespace

int terminal_width() {
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS"); columns && std::atoi(columns) > 0) return std::atoi(columns);
  return 80;
}

std::string fit_line(const std::vector<Part>& parts, int width) {
  // Keep the most important parts that fit in width - 1 columns (a full
  // last column makes some terminals wrap), shown in their given order; the
  // bar takes what is left, between 10 and 30 columns.
  const int room = std::max(1, width - 1);
  std::vector<bool> kept(parts.size(), false);
  int used = 0;
  int bar = -1;
  for (int priority = 0; priority < 100; ++priority)
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].priority != priority) continue;
      if (parts[i].bar_fraction >= 0) {
        bar = static_cast<int>(i);
        continue;
      }
      const int cost = static_cast<int>(parts[i].text.size()) + (used > 0 ? 1 : 0);
      if (used + cost <= room) kept[i] = true, used += cost;
    }
  int bar_width = 0;
  if (bar >= 0 && room - used - 1 >= 12) {
    bar_width = std::min(22, room - used - 1);
    kept[static_cast<size_t>(bar)] = true;
  }
  std::string line;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!kept[i]) continue;
    if (!line.empty()) line += ' ';
    if (static_cast<int>(i) == bar) {
      const int inner = bar_width - 2, full = static_cast<int>(parts[i].bar_fraction * inner + 0.5);
      line +=
          "[" + std::string(static_cast<size_t>(full), '#') + std::string(static_cast<size_t>(inner - full), '.') + "]";
    } else {
      line += parts[i].text;
    }
  }
  if (static_cast<int>(line.size()) > room) line.resize(static_cast<size_t>(room));
  return line;
}

namespace {

class Console : public trainyard::Callback {
 public:
  Console(double every, bool live, double plain_every, bool quiet)
      : every_(every), live_(live), plain_every_(plain_every), quiet_(quiet) {}

  void before_run(trainyard::Loop&) override { run_start_ = Clock::now(); }
  void before_epoch(trainyard::Loop& loop) override {
    epoch_start_ = last_draw_ = last_plain_ = Clock::now();
    samples_ = 0;
    start_position_ = loop.position();
    losses_ = {};
  }
  void after_train_iter(trainyard::Loop& loop, const trainyard::StepResult& r) override {
    if (quiet_) return;
    samples_ += r.batch.size();
    // Read when the line is drawn, not at every step: on a GPU each read
    // waits for the device.
    if (live_ || plain_every_ > 0) losses_.add(r.loss);
    const auto now = Clock::now();
    const bool draw = live_ && seconds(last_draw_, now) >= every_;
    const bool plain = !live_ && plain_every_ > 0 && seconds(last_plain_, now) >= plain_every_;
    if (!draw && !plain) return;
    const double elapsed = seconds(epoch_start_, now);
    const int64_t per_epoch = loop.iterations_per_epoch();
    const int64_t done = loop.position() - start_position_, left = per_epoch - loop.position();
    const double per_iteration = done > 0 ? elapsed / double(done) : 0;
    const double eta = per_iteration * double(left);
    const double run_eta = per_iteration * double(left + (loop.epochs() - loop.epoch() - 1) * per_epoch);
    const double fraction = per_epoch > 0 ? double(loop.position()) / double(per_epoch) : 0;
    const std::vector<Part> parts = {
        {"epoch " + std::to_string(loop.epoch() + 1) + "/" + std::to_string(loop.epochs()), 0},
        {"", 6, fraction},
        {std::to_string(loop.position()) + "/" + std::to_string(per_epoch), 4},
        {format("%3.0f%%", 100 * fraction), 1},
        {format("loss %.4g", losses_.mean()), 2},
        {format("%.0f samples/s", elapsed > 0 ? double(samples_) / elapsed : 0.0), 5},
        {"ETA " + duration_text(eta), 3},
        {"run " + duration_text(run_eta), 7},
        {last_test_.empty() ? "" : "|" + last_test_, last_test_.empty() ? 99 : 8},
    };
    show(parts, draw);
    if (draw)
      last_draw_ = now;
    else
      last_plain_ = now;
    losses_ = {};
  }
  void before_test(trainyard::Loop&) override { test_start_ = last_draw_ = Clock::now(); }
  void after_test_batch(trainyard::Loop& loop, int64_t done, int64_t total) override {
    if (quiet_ || !live_) return;
    const auto now = Clock::now();
    if (seconds(last_draw_, now) < every_) return;
    const double elapsed = seconds(test_start_, now), fraction = total > 0 ? double(done) / double(total) : 0;
    const std::vector<Part> parts = {
        {"epoch " + std::to_string(loop.position() ? loop.epoch() + 1 : loop.epoch()) + "/" +
             std::to_string(loop.epochs()),
         0},
        {"testing", 1},
        {"", 5, fraction},
        {std::to_string(done) + "/" + std::to_string(total), 2},
        {format("%3.0f%%", 100 * fraction), 3},
        {"ETA " + duration_text(done > 0 ? elapsed / double(done) * double(total - done) : 0), 4},
    };
    show(parts, true);
    last_draw_ = now;
  }
  void after_test(trainyard::Loop& loop, const trainyard::MeterValues& values) override {
    if (quiet_) return;
    clear_line();
    last_test_ = values_text(values);
    std::printf("epoch %lld/%lld iteration %lld test:%s\n",
                (long long)(loop.position() ? loop.epoch() + 1 : loop.epoch()), (long long)loop.epochs(),
                (long long)loop.iteration(), last_test_.c_str());
    std::fflush(stdout);
  }
  void after_epoch(trainyard::Loop& loop) override {
    if (quiet_) return;
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
  static double seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }
  void show(const std::vector<Part>& parts, bool live) {
    if (live)
      std::printf("\r\033[K%s", fit_line(parts, terminal_width()).c_str());
    else
      std::printf("%s\n", fit_line(parts, 100000).c_str());
    std::fflush(stdout);
  }
  void clear_line() {
    if (live_) std::printf("\r\033[K");
  }
  double every_;
  bool live_;
  double plain_every_;
  bool quiet_;
  Clock::time_point run_start_, epoch_start_, last_draw_, last_plain_, test_start_;
  int64_t samples_ = 0, start_position_ = 0;
  /// The steps' losses since the last line, summed where they are.
  class LossSum {
   public:
    void add(const at::Tensor& loss) {
      pending_.push_back(loss.detach());
      ++count_;
      if (pending_.size() >= 256) fold();  // a bounded list, one sum per 256 steps
    }
    double mean() {  // one read of the device
      fold();
      return count_ > 0 ? sum_.item<double>() / static_cast<double>(count_) : 0.0;
    }

   private:
    void fold() {
      if (pending_.empty()) return;
      const at::Tensor part = at::stack(pending_).to(at::kDouble).sum();
      sum_ = sum_.defined() ? sum_ + part : part;
      pending_.clear();
    }
    std::vector<at::Tensor> pending_;
    at::Tensor sum_;
    int64_t count_ = 0;
  };
  LossSum losses_;
  std::string last_test_;
};

struct ConsoleOptions {
  double refresh_secs = 0;
  std::string progress;
  double plain_every_secs = 0;
};

const trainyard::TypedSchema<ConsoleOptions>& typed_schema() {
  static const trainyard::TypedSchema<ConsoleOptions> s = [] {
    using O = ConsoleOptions;
    trainyard::TypedSchema<O> t;
    t.add("refresh_secs", &O::refresh_secs, 0.5, "how often the live line is redrawn on a terminal").min(0.0);
    t.add("progress", &O::progress, "auto", "the live line: auto (only on a terminal), always, never")
        .one_of({"auto", "always", "never"});
    t.add("plain_every_secs", &O::plain_every_secs, 30.0,
          "without the live line: a plain progress line this often; 0: none")
        .min(0.0);
    return t;
  }();
  return s;
}

}  // namespace

trainyard::Schema schema() { return typed_schema().schema(); }

std::shared_ptr<trainyard::Callback> make(const trainyard::Options& options, const trainyard::Context& context) {
  const ConsoleOptions o = typed_schema().bind(options);
  bool live = o.progress == "always" || (o.progress == "auto" && ::isatty(STDOUT_FILENO));
  // Other ranks would repeat rank 0's lines (the ranks agree on every value).
  return std::make_shared<Console>(o.refresh_secs, live, o.plain_every_secs, context.rank != 0);
}

}  // namespace console
