#pragma once
// Looking at an experiment without training it: what `trainyard iterate`
// measures. The modes (`run --dry-run`, validate, iterate, the names of a
// run's values) are Runner's (run/runner.h), their bodies in run/inspect.cpp.
#include <cstdint>

namespace trainyard::host {

/// What `trainyard iterate` measured (Runner::iterate): the training split's
/// input pipeline alone (decode threads, loader), no network.
struct IterateResult {
  int64_t samples = 0, batches = 0;
  double seconds = 0;          ///< from the loader's start to its last batch
  int64_t steady_samples = 0;  ///< after the first batch (threads started, caches warm)
  double steady_seconds = 0;
  int64_t decode_threads = 0;
  int64_t bad_records = 0;
};

}  // namespace trainyard::host
