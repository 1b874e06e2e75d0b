#pragma once
// Looking at an experiment without training it: `run --dry-run` and what
// `validate` prints about the built components.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "config/experiment.h"

namespace trainyard::host {

/// One process, no run directory: the components of `experiment` built, one
/// train and one test batch run; the report and the parameter groups.
std::string dry_run(const Experiment& experiment);

/// `trainyard validate`: builds every stage as a run would (components and
/// one batch through them) and writes what it built to `out`: datasets and
/// their sizes, the network's parameters, each stage's optimizer groups and
/// what is frozen. Throws ConfigError naming the stage that failed.
void validate(const Experiment& experiment, std::ostream& out);

/// The names of the values a run of `experiment` reports (train_*, test_*,
/// lr, ...): its components built on the CPU and one batch put through
/// them, as validate does, nothing written. For checking a name (a sweep's
/// --metric) before anything trains.
std::vector<std::string> run_value_names(const Experiment& experiment);

/// What `trainyard iterate` measured: the training split's input pipeline
/// alone (decode threads, loader), no network.
struct IterateResult {
  int64_t samples = 0, batches = 0;
  double seconds = 0;          ///< from the loader's start to its last batch
  int64_t steady_samples = 0;  ///< after the first batch (threads started, caches warm)
  double steady_seconds = 0;
  int64_t decode_threads = 0;
  int64_t bad_records = 0;
};
/// Draws epoch 0's training batches as a run would, `batch_limit` of them
/// (0: the whole epoch).
IterateResult iterate(const Experiment& experiment, int64_t batch_limit);

}  // namespace trainyard::host
