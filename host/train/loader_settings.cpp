#include "train/loader_settings.h"

#include <map>
#include <memory>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "data/samplers.h"
#include "log/log.h"
#include "train/components.h"
#include "train/guard.h"
#include "util/json.h"
#include "util/text.h"

namespace trainyard::host {

namespace {

// P x K batches: the training set's labels, checked (a class under K
// samples, too few classes, fewer batches than ranks) before anything is written.
std::unique_ptr<Sampler> pk_sampler(const LoopConfig& loop, const std::string& where, const Built<Dataset>& data,
                                    const Context& context) {
  const ComponentConfig& config = *data.config;
  const AllLabels* known = data.facets.all_labels;
  if (!known)
    throw ConfigError(where + ": P x K batches need the training dataset's labels, and dataset '" + config.plugin +
                          "' does not report them",
                      "expected a dataset that implements trainyard::AllLabels (SDK 1.3; the built-in fashion_mnist, "
                      "synthetic, image_folder and csv do)",
                      "set loop.classes_per_batch: 0, or use such a dataset");
  const at::Tensor labels =
      guarded(config, "all_labels", [&] { return known->all_labels(); }).to(at::kLong).contiguous();
  PkSampler::Options o;
  o.labels.assign(labels.const_data_ptr<int64_t>(), labels.const_data_ptr<int64_t>() + labels.numel());
  o.classes_per_batch = loop.classes_per_batch;
  o.samples_per_class = loop.samples_per_class;
  o.with_replacement = loop.pk_with_replacement;
  std::map<int64_t, int64_t> sizes;
  for (int64_t label : o.labels) ++sizes[label];
  for (const auto& [label, n] : sizes)
    if (n < o.samples_per_class && !o.with_replacement)
      throw ConfigError(where + ": class " + std::to_string(label) + " has " + count_of(n, "sample") +
                            ", fewer than loop.samples_per_class " + std::to_string(o.samples_per_class),
                        "expected at least K samples in every class of the training set",
                        "lower loop.samples_per_class, or set loop.pk_with_replacement: true to draw such classes "
                        "with replacement");
  auto sampler = std::make_unique<PkSampler>(std::move(o));
  if (sampler->total_batches() < context.world_size)
    throw ConfigError(where + ": the training set gives " + count_of(sampler->total_batches(), "batch", "batches") +
                          " of " + std::to_string(loop.classes_per_batch) + " classes x " +
                          std::to_string(loop.samples_per_class) + " samples (" +
                          count_of(static_cast<int64_t>(sizes.size()), "class", "classes") + ") for " +
                          count_of(context.world_size, "rank"),
                      "expected at least one batch per rank", "lower loop.classes_per_batch or loop.samples_per_class");
  return sampler;
}

}  // namespace

std::unique_ptr<Sampler> make_sampler(const LoopConfig& loop, const std::string& pk_where, const Built<Dataset>& data,
                                      const Context& context) {
  std::unique_ptr<Sampler> sampler;
  if (loop.classes_per_batch > 0) {
    sampler = pk_sampler(loop, pk_where, data, context);
  } else {
    sampler =
        std::make_unique<ShuffledSampler>(ShuffledSampler::Options{.dataset_size = data.object->size(),
                                                                   .samples_per_epoch = loop.train_samples_per_epoch,
                                                                   .batch_size = loop.batch_per_device,
                                                                   .shuffle = loop.shuffle,
                                                                   .drop_last = loop.drop_last});
  }
  sampler->shard(context.rank, context.world_size);
  return sampler;
}

std::string sampling_note(const LoopConfig& loop) {
  if (loop.classes_per_batch <= 0) return "";
  return "; P x K batches of " + count_of(loop.classes_per_batch, "class", "classes") + " x " +
         count_of(loop.samples_per_class, "sample");
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

LoaderOptions make_loader_options(const LoopConfig& loop, uint64_t seed, const ComponentConfig& network,
                                  const Built<Dataset>& built, int64_t batch_size, const Context& context) {
  const ComponentConfig& data = *built.config;
  LoaderOptions o;
  o.batch_size = batch_size;
  o.drop_last = data.key == "dataset.train" && loop.drop_last;
  o.threads = decode_threads(loop).count;
  o.prefetch = static_cast<int>(loop.prefetch_batches);
  o.seed = seed;
  o.skip_bad_records = data.skip_bad_records;
  o.max_bad_fraction = data.max_bad_fraction;
  o.device = context.device;
  o.channels_last = network.memory_format == "channels_last";
  o.owner = data.crash_label.empty() ? nullptr : data.crash_label.c_str();
  o.normalization = input_normalization(data, *built.object, built.facets);
  o.streamed = dataset_streamed(data, *built.object, built.facets);
  o.fields = built.facets.field_dataset;
  return o;
}

}  // namespace trainyard::host
