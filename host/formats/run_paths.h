#pragma once
// Where a run directory keeps its files.
#include <filesystem>
#include <string>

namespace trainyard::host {

struct RunPaths {
  std::string run_dir;
  std::string checkpoints;  ///< run_dir/checkpoints
  std::string metrics;      ///< run_dir/metrics.jsonl (rank 0's events)
  std::string summary;      ///< run_dir/summary.json
  std::string profile;      ///< run_dir/profile (--profile's traces and summaries)
  explicit RunPaths(const std::string& dir)
      : run_dir(dir),
        checkpoints((std::filesystem::path(dir) / "checkpoints").string()),
        metrics((std::filesystem::path(dir) / "metrics.jsonl").string()),
        summary((std::filesystem::path(dir) / "summary.json").string()),
        profile((std::filesystem::path(dir) / "profile").string()) {}
  /// Another rank's own events: run_dir/logs/rank-N.jsonl.
  std::string rank_log(int rank) const {
    return (std::filesystem::path(run_dir) / "logs" / ("rank-" + std::to_string(rank) + ".jsonl")).string();
  }
};

}  // namespace trainyard::host
