#pragma once
// The run log: the events a run logs (metrics.jsonl, through the one codec in
// formats/metrics.h) and its summary.json. Rank 0 writes the run's files;
// every other rank its own logs/rank-N.jsonl and no summary.
#include <string>

#include "formats/metrics.h"
#include "formats/run_paths.h"
#include "train/checkpoint.h"

namespace trainyard::host {

class RunLog {
 public:
  RunLog(RunPaths paths, int rank);

  void append(const MetricsEvent& event);
  /// One event of `phase` at the loop's position `at`: the epoch it belongs
  /// to, counted from 1 (events after an epoch's last iteration, its test
  /// pass, carry that epoch's number); `stage` "" in a single-stage run.
  void append(const std::string& phase, const std::map<std::string, double>& values, const LoopPosition& at,
              const std::string& stage);
  /// Drops events logged after `iteration`: a resumed run replays that
  /// future, and metrics.jsonl must tell one consistent history.
  void forget_after(int64_t iteration);
  void write_summary(const RunSummary& summary);
  bool has_summary() const;
  bool writes_run_files() const { return rank_ == 0; }

 private:
  RunPaths paths_;
  int rank_;
  std::string file_;  ///< where this rank's events go
};

}  // namespace trainyard::host
