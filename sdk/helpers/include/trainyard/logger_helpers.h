#pragma once
/// Pieces every logger callback needs (the built-in tensorboard, mlflow_logger
/// and csv_logger use them). Header-only.
///
///   trainyard::grouped_name("test_accuracy_top1")      // "test/accuracy_top1"
///   trainyard::phase_values(loop.values(), "train")     // the train_* values
///   trainyard::Throughput speed;  speed.restart();  speed.add(n);  speed.take_per_sec();
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace trainyard {

/// A meter value's name with its phase as a group: train_loss -> train/loss
/// (TensorBoard's and MLflow's convention); other names stay.
inline std::string grouped_name(const std::string& name) {
  for (const std::string phase : {"train_", "test_"})
    if (name.rfind(phase, 0) == 0) return phase.substr(0, phase.size() - 1) + "/" + name.substr(phase.size());
  return name;
}

/// The values whose names start with `phase` and '_' ("train": train_loss, ...).
inline std::map<std::string, double> phase_values(const std::map<std::string, double>& values, const std::string& phase) {
  std::map<std::string, double> out;
  for (const auto& [name, value] : values)
    if (name.rfind(phase + "_", 0) == 0) out[name] = value;
  return out;
}

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
