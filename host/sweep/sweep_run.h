#pragma once
// Running a sweep: every point validated first (a bad value fails the sweep
// before anything runs), then each point as its own `trainyard run` process,
// N at a time, with sweep.csv and sweep.md rewritten as results come in.
#include <string>
#include <vector>

#include "sweep/sweep.h"

namespace trainyard::host {

struct SweepRequest {
  std::string experiment;                ///< EXP.yaml
  std::vector<std::string> sets;         ///< --set for every point
  std::vector<std::string> plugin_dirs;  ///< --plugin-dir
  std::vector<std::string> grid;         ///< --grid KEY=V1,V2 arguments
  int parallel = 1;                      ///< runs at a time
  std::string output_dir;                ///< "" for output.dir
};

struct SweepOutcome {
  std::string sweep_dir;
  size_t runs = 0;
  int failures = 0;
};

/// Throws ConfigError for a bad request or a point that does not validate.
SweepOutcome run_sweep(const SweepRequest& request);

}  // namespace trainyard::host
