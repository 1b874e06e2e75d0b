#pragma once
/// Pieces every logger callback needs (the built-in tensorboard, mlflow_logger
/// and csv_logger use them; RunEnd, the loggers that open a run: tensorboard
/// and mlflow_logger). Header-only.
///
///   trainyard::grouped_name("test_accuracy_top1")      // "test/accuracy_top1"
///   trainyard::phase_values(loop.values(), "train")     // the train_* values
///   trainyard::Throughput speed;  speed.restart();  speed.add(n);  speed.take_per_sec();
///   trainyard::RunEnd end_{[this](bool finished) { tracker_->close(finished); }};  // begin(), finish()
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

namespace trainyard {

/// A meter value's name with its phase as a group: train_loss -> train/loss
/// (TensorBoard's and MLflow's convention); other names stay.
inline std::string grouped_name(const std::string& name) {
  for (const std::string phase : {"train_", "test_"})
    if (name.rfind(phase, 0) == 0) return phase.substr(0, phase.size() - 1) + "/" + name.substr(phase.size());
  return name;
}

/// The values whose names start with `phase` and '_' ("train": train_loss, ...).
inline std::map<std::string, double> phase_values(const std::map<std::string, double>& values,
                                                  const std::string& phase) {
  std::map<std::string, double> out;
  for (const auto& [name, value] : values)
    if (name.rfind(phase + "_", 0) == 0) out[name] = value;
  return out;
}

/// How a logger ends the run it opened in before_run, exactly once: as
/// finished from after_run (finish()), or, when the callback is destroyed
/// without that (the run ended by an error), as failed from this member's
/// destructor, where whatever the ending throws is dropped. Declare it after
/// what `end` uses, so that it is destroyed first.
class RunEnd {
 public:
  /// `end(true)`: the run finished; `end(false)`: it failed.
  explicit RunEnd(std::function<void(bool finished)> end) : end_(std::move(end)) {}
  RunEnd(const RunEnd&) = delete;
  RunEnd& operator=(const RunEnd&) = delete;
  ~RunEnd() {
    if (open_) try {
        end_(false);
      } catch (...) {}
  }
  /// The run is open: it has to end.
  void begin() { open_ = true; }
  bool open() const { return open_; }
  /// Ends an open run as finished (nothing otherwise). If that throws, the
  /// run stays open and the destructor ends it as failed.
  void finish() {
    if (!open_) return;
    end_(true);
    open_ = false;
  }

 private:
  std::function<void(bool)> end_;
  bool open_ = false;
};

/// Samples per second since the last restart or take.
class Throughput {
 public:
  void restart() { since_ = std::chrono::steady_clock::now(), samples_ = 0; }
  void add(int64_t samples) { samples_ += samples; }
  double take_per_sec() {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
    const double rate = secs > 0 ? double(samples_) / secs : 0.0;
    restart();
    return rate;
  }

 private:
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
  int64_t samples_ = 0;
};

}  // namespace trainyard
