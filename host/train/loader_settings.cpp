#include "train/loader_settings.h"

#include <ATen/Parallel.h>

#include "log/log.h"
#include "train/components.h"
#include "util/json.h"
#include "util/text.h"

namespace trainyard::host {

EpochPlan make_epoch_plan(const Experiment& e, int64_t dataset_size, const Context& context) {
  EpochPlan plan;
  plan.dataset_size = dataset_size;
  plan.samples_per_epoch = e.loop.train_samples_per_epoch;
  plan.batch_size = e.loop.batch_per_device;
  plan.shuffle = e.loop.shuffle;
  plan.drop_last = e.loop.drop_last;
  plan.seed = e.seed;
  plan.rank = context.rank;
  plan.world_size = context.world_size;
  return plan;
}

void report_bad_records(const ComponentConfig& data, const LoaderStats& stats, const std::string& when) {
  const int64_t count = stats.bad_records.load();
  if (count == 0) return;
  log_warning("warning: " + data.key + ": skipped " + count_of(count, "bad record") + " in " + when +
              " (on_bad_record: skip, at most max_bad_fraction " + json_number(data.max_bad_fraction) +
              "); the first: " + stats.first_bad());
}

DecodeThreads decode_threads(const LoopConfig& loop) {
  if (auto set = loop.decode_thread_count()) return {static_cast<int>(*set), "set"};
  const int cpus = at::get_num_threads();
  if (cpus <= 1) return {1, "auto: 1 CPU for this rank, shared with the training thread"};
  return {cpus - 1, "auto: " + std::to_string(cpus) + " CPUs for this rank, one kept for the training thread"};
}

LoaderOptions make_loader_options(const Experiment& e, const ComponentConfig& data, const Dataset& dataset,
                                  int64_t batch_size, const Context& context) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.drop_last = data.key == "dataset.train" && e.loop.drop_last;
  o.threads = decode_threads(e.loop).count;
  o.prefetch = static_cast<int>(e.loop.prefetch_batches);
  o.seed = e.seed;
  o.skip_bad_records = data.skip_bad_records;
  o.max_bad_fraction = data.max_bad_fraction;
  o.device = context.device;
  o.channels_last = e.network.memory_format == "channels_last";
  o.owner = data.crash_label.empty() ? nullptr : data.crash_label.c_str();
  o.normalization = input_normalization(data, dataset);
  o.streamed = dataset_streamed(data, dataset);
  return o;
}

}  // namespace trainyard::host
