#pragma once
// A run on an MLflow tracking server, through its REST API (libcurl):
//   GET  /api/2.0/mlflow/experiments/get-by-name   (else POST experiments/create)
//   POST /api/2.0/mlflow/runs/create               run_name, start_time, tags -> run_id, artifact_uri
//   POST /api/2.0/mlflow/runs/log-batch            params, tags, metrics (at most 1000 metrics, 100 params+tags)
//   PUT  /api/2.0/mlflow-artifacts/artifacts/PATH  a file (servers that serve artifacts, the 3.x default)
//   POST /api/2.0/mlflow/runs/update               status (a name: RUNNING, FINISHED, ...), end_time
// MLFLOW_TRACKING_TOKEN (bearer) or MLFLOW_TRACKING_USERNAME and _PASSWORD
// authenticate, as for MLflow's own client.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tracker.h"

namespace mlflow_logger {

class RestRun : public Tracker {
 public:
  /// Creates the run (or, with `run_id`, continues it) in the experiment
  /// named `experiment` at `server` (http://host:port[/prefix]). Throws
  /// std::runtime_error naming the request when the server cannot be used.
  RestRun(const std::string& server, const std::string& experiment, const std::string& run_name,
          const std::string& run_id);
  const std::string& run_id() const override { return run_id_; }
  void param(const std::string& key, const std::string& value) override;
  void tag(const std::string& key, const std::string& value) override;
  void metric(const std::string& key, double value, int64_t step) override;
  void flush() override;
  /// A server keeps every point; the redone steps are logged again.
  void truncate_metrics_after(int64_t) override {}
  void artifact(const std::string& file, const std::string& name) override;
  void finish(RunStatus status) override;

 private:
  nlohmann::json call(const std::string& method, const std::string& path, const nlohmann::json& body,
                      bool allow_missing = false);
  std::string server_, run_id_, artifact_path_;
  nlohmann::json params_ = nlohmann::json::array(), tags_ = nlohmann::json::array(), metrics_ = nlohmann::json::array();
};

}  // namespace mlflow_logger
