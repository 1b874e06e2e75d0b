#pragma once
// MLflow's file store (an `mlruns/` folder), written directly: what
// mlflow.search_runs, MlflowClient.get_metric_history, list_artifacts and
// `mlflow ui` read (checked against mlflow 3.17, which opens a file store
// only with MLFLOW_ALLOW_FILE_STORE=true in the reader's environment).
//
//   mlruns/<experiment id>/meta.yaml             name, artifact_location, lifecycle_stage, times (ms)
//   mlruns/<experiment id>/<run id>/meta.yaml     run_id, run_name, experiment_id, status (1 running,
//                                                 3 finished, 4 failed, 5 killed), start/end_time (ms)
//   .../<run id>/params/<key>                     the value, no newline; written once
//   .../<run id>/tags/<key>                       the value, no newline
//   .../<run id>/metrics/<key>                    "<timestamp ms> <value> <step>\n" per point
//   .../<run id>/artifacts/...                    files
// A key with '/' is a sub-folder (metrics/train/loss). Every file under
// params/, tags/ and metrics/ is read as a key: no temporary files there.
#include <cstdint>
#include <map>
#include <string>

#include "tracker.h"

namespace mlflow_logger {

class FileStoreRun : public Tracker {
 public:
  /// The run `run_id` of the experiment named `experiment` under `root`,
  /// created with both if needed; an existing run (a resumed training run)
  /// is marked running again.
  FileStoreRun(const std::string& root, const std::string& experiment, const std::string& run_name,
               const std::string& run_id);
  const std::string& run_id() const override { return run_id_; }
  const std::string& experiment_id() const { return experiment_id_; }

  void param(const std::string& key, const std::string& value) override;
  void tag(const std::string& key, const std::string& value) override;
  void metric(const std::string& key, double value, int64_t step) override;
  void truncate_metrics_after(int64_t step) override;
  /// Copies `file` into artifacts/ as `name`.
  void artifact(const std::string& file, const std::string& name) override;
  void finish(RunStatus status) override;

  /// 32 lowercase hex digits, as MLflow's own run ids.
  static std::string new_run_id();
  /// MLflow's key rule: [A-Za-z0-9_ .-:/], at most 250, no empty, '.' or '..' segment.
  static bool valid_key(const std::string& key);

 private:
  void write_run_meta(RunStatus status, int64_t end_time) const;
  std::string root_, experiment_id_, run_id_, run_name_, run_dir_;
  int64_t start_time_ = 0;
};

}  // namespace mlflow_logger
