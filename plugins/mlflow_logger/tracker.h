#pragma once
// Where a run's MLflow records go: the file store (an mlruns folder) or a
// tracking server through MLflow's REST API. One interface, so the callback
// does not care.
#include <chrono>
#include <cstdint>
#include <string>

namespace mlflow_logger {

/// Milliseconds since the epoch: MLflow's times.
inline int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

enum class RunStatus { running = 1, finished = 3, failed = 4, killed = 5 };

class Tracker {
 public:
  virtual ~Tracker() = default;
  virtual const std::string& run_id() const = 0;
  virtual void param(const std::string& key, const std::string& value) = 0;
  virtual void tag(const std::string& key, const std::string& value) = 0;
  virtual void metric(const std::string& key, double value, int64_t step) = 0;
  /// Sends what is buffered (a tracking server gets metrics in batches).
  virtual void flush() {}
  /// Drops the points past `step` (a resumed run redoes them), where the
  /// store allows it.
  virtual void truncate_metrics_after(int64_t step) = 0;
  virtual void artifact(const std::string& file, const std::string& name) = 0;
  virtual void finish(RunStatus status) = 0;
};

}  // namespace mlflow_logger
