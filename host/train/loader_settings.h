#pragma once
// What the experiment's sections say about reading data: the training split's
// sampler, a split's loader settings, the decode threads, and the end-of-pass
// report of skipped records. Shared by the loop, the dry run and `iterate`.
#include <cstdint>
#include <memory>
#include <string>

#include "config/experiment.h"
#include "config/sections.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "train/components.h"
#include "trainyard/context.h"
#include "trainyard/dataset.h"

namespace trainyard::host {

/// The training split's sampler, as the loop's settings choose it, sharded
/// for context's rank (shared by the loop, the dry run and `trainyard
/// iterate`): the one place that reads the sampling keys of `loop:`, and
/// where a new sampler is registered. P x K batches
/// (loop.classes_per_batch) read the dataset's labels (AllLabels) and throw
/// ConfigError for a dataset without them, a class of fewer than K samples
/// or fewer batches than ranks; otherwise ShuffledSampler (loop.shuffle).
/// `pk_where` is where loop.classes_per_batch is written
/// (Experiment::where), for those errors.
std::unique_ptr<Sampler> make_sampler(const LoopConfig& loop, const std::string& pk_where, const Built<Dataset>& data,
                                      const Context& context);
/// The start-up line's words on a sampler other than the plain one, from
/// the same keys: "; P x K batches of 4 classes x 8 samples", or "".
std::string sampling_note(const LoopConfig& loop);
/// A split's loader settings: the split's own entry's, the loop's
/// (drop_last for the training split, decode_threads, prefetch_batches), the
/// experiment's seed and the network entry's memory_format.
LoaderOptions make_loader_options(const LoopConfig& loop, uint64_t seed, const ComponentConfig& network,
                                  const Built<Dataset>& data, int64_t batch_size, const Context& context);

/// loop.decode_threads as a count, and how auto chose it: one thread per CPU
/// this rank may use but one, the training thread's. The CPUs are the intra-op
/// threads make_context set (affinity mask or Slurm's cpus-per-task, divided
/// by the ranks on this node, or distributed.threads_per_process).
struct DecodeThreads {
  int count = 0;
  std::string how;  ///< "set" or "auto: ..."
};
DecodeThreads decode_threads(const LoopConfig& loop);

/// Skipped records, once per epoch or test pass, with the first one's reason
/// (each rank its own: each reads its own shard). Nothing when none.
void report_bad_records(const ComponentConfig& data, const LoaderStats& stats, const std::string& when);

}  // namespace trainyard::host
