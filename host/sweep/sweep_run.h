#pragma once
// Running a sweep: every point (a grid's combinations, or a search space's
// trials) validated first (a bad value fails the sweep before anything runs),
// then each point as its own `trainyard run` process, N at a time: to the end,
// or with --halving to the rungs successive halving promotes it to. sweep.csv
// and sweep.md are rewritten, ranked, as results come in.
#include <string>
#include <vector>

#include "sweep/sweep.h"

namespace trainyard::host {

struct SweepRequest {
  std::string experiment;                ///< EXP.yaml
  std::vector<std::string> sets;         ///< --set for every point
  std::vector<std::string> plugin_dirs;  ///< --plugin-dir
  std::vector<std::string> grid;         ///< --grid KEY=V1,V2 arguments
  std::vector<std::string> space;        ///< --space KEY=DIST(...) arguments
  int64_t trials = 0;                    ///< --trials: points drawn from the space
  uint64_t seed = 0;                     ///< --seed: of the draws
  int parallel = 1;                      ///< runs at a time
  std::string output_dir;                ///< "" for output.dir
  bool halving = false;                  ///< --halving: asynchronous successive halving (sweep/halving.h)
  std::string metric;                    ///< the value runs are ranked by; "" for stopping.monitor
  int64_t reduction = 3;                 ///< --reduction: the top 1/reduction of a rung is promoted
  int64_t min_epochs = 1;                ///< --min-epochs: the first rung
};

struct SweepOutcome {
  std::string sweep_dir;
  size_t runs = 0;
  int failures = 0;
  int64_t epochs_trained = 0;  ///< by this invocation, over all runs
  std::string best;            ///< the best run by the ranking metric ("" without one)
};

/// Throws ConfigError for a bad request or a point that does not validate.
SweepOutcome run_sweep(const SweepRequest& request);

}  // namespace trainyard::host
