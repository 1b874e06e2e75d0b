#include "data/loader.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "data/aten_threads.h"
#include "data/device_copy.h"
#include "data/normalize.h"
#include "trainyard/error.h"
#include "trainyard/random.h"
#include "util/json.h"
#include "util/process.h"
#include "util/shape.h"

namespace trainyard::host {
namespace {

// splitmix64 (trainyard/random.h): its output is fixed by its definition,
// unlike std::shuffle's across standard libraries.
uint64_t mix(uint64_t z) { return SplitMix64::mix(z); }

}  // namespace

std::optional<LabelOutOfRange> first_label_out_of_range(const at::Tensor& class_labels, int64_t num_classes) {
  const at::Tensor labels = class_labels.to(at::kLong);
  int64_t low = 0, high = 0;
  if (labels.device().is_cpu() && labels.is_contiguous() && labels.numel() > 0) {
    // Read in place: a batch's labels are few, ATen's reductions cost more than the scan.
    const int64_t* p = labels.const_data_ptr<int64_t>();
    const auto [lo, hi] = std::minmax_element(p, p + labels.numel());
    low = *lo, high = *hi;
  } else if (labels.numel() > 0) {
    const auto [min, max] = at::aminmax(labels);  // one pass
    low = min.item<int64_t>(), high = max.item<int64_t>();
  }
  if (low >= 0 && high < num_classes) return std::nullopt;
  const at::Tensor bad = ((labels < 0) | (labels >= num_classes)).nonzero();
  const int64_t k = bad[0][0].item<int64_t>();
  return LabelOutOfRange{k, labels[k].item<int64_t>(), bad.size(0)};
}

namespace {

// What every batch must be, whichever dataset made it: one row per index
// asked for, the shape the dataset's info declares, class labels within its
// classes. Cheap: shapes, plus a min and max of a 1-d label vector.
void check_batch(const Batch& batch, const std::vector<int64_t>& ids, const DatasetInfo& info, bool box_labels) {
  const auto rows = static_cast<int64_t>(ids.size());
  if (!batch.input.defined() || !batch.target.defined())
    throw ConfigError(
        "get_batch returned an undefined " + std::string(batch.input.defined() ? "target" : "input") + " tensor",
        "expected input and target tensors with one row per sample", "");
  if (batch.input.dim() == 0 || batch.input.size(0) != rows || batch.target.dim() == 0 || batch.target.size(0) != rows)
    throw ConfigError("get_batch returned input " + shape_text(batch.input.sizes()) + " and target " +
                          shape_text(batch.target.sizes()) + " for " + std::to_string(rows) + " indices",
                      "expected " + std::to_string(rows) + " rows in both (one per index, in order)", "");
  if (!info.sample_shape.empty() && batch.input.sizes().slice(1) != at::IntArrayRef(info.sample_shape))
    throw ConfigError(
        "samples of shape " + shape_text(batch.input.sizes().slice(1)) + " (sample " + std::to_string(ids[0]) + " on)",
        "expected the shape the dataset's info declares, " + shape_text(info.sample_shape),
        "give the dataset load_size (and crop_size) so that every image has that size");
  // With boxes the classes are the box labels' (checked with the fields), not the target's.
  if (info.num_classes <= 0 || box_labels || batch.target.dim() != 1 || at::isFloatingType(batch.target.scalar_type()))
    return;
  std::optional<LabelOutOfRange> bad;
  off_the_training_stream(batch.target, [&] { bad = first_label_out_of_range(batch.target, info.num_classes); });
  if (bad)
    throw ConfigError("sample " + std::to_string(ids[static_cast<size_t>(bad->position)]) + " has label " +
                          std::to_string(bad->label),
                      "expected a class index from 0 to " + std::to_string(info.num_classes - 1) +
                          " (the dataset has " + std::to_string(info.num_classes) + " classes)",
                      "check the labels, or the dataset's class count");
}

// A sample's fields at fault (a bad record); the batch's as a whole (the
// dataset's error: ConfigError).
std::optional<std::string> sample_field_problem(const FieldBatch& b, const std::vector<int64_t>& ids,
                                                const DatasetInfo& info, size_t* position) {
  const auto p = first_field_problem(b.fields, b.batch.input, static_cast<int64_t>(ids.size()), info);
  if (!p) return std::nullopt;
  if (p->position < 0)
    throw ConfigError("get_batch_with_fields returned " + p->what + " (sample " + std::to_string(ids[0]) + " on)",
                      "expected fields as trainyard/fields.h describes them", "");
  *position = static_cast<size_t>(p->position);
  return p->what;
}

// One batch: decode its samples, each with its own seed (a dataset that
// augments uses it), collate. A bad record (or, for a dataset with fields, a
// sample whose fields are at fault) makes it retry sample by sample. An empty
// optional means every sample was a skipped bad record.
std::optional<FieldBatch> assemble_unchecked(const Dataset& dataset, const std::vector<int64_t>& ids, int64_t epoch,
                                             const LoaderOptions& options, LoaderStats* stats, int64_t epoch_samples,
                                             const DatasetInfo& info) {
  auto bad = [&](int64_t index, const BadRecord& e) {
    const std::string what = "sample " + std::to_string(index) + ": " + e.what();
    if (!options.skip_bad_records) throw ConfigError(what, "expected a readable record", options.bad_record_hint);
    if (!stats) return;
    const int64_t count = ++stats->bad_records;
    stats->note_bad(what);
    // Past the cap for the whole epoch, not for the samples seen so far: an
    // early bad record in a small first batch is no reason to stop.
    const auto allowed = static_cast<int64_t>(options.max_bad_fraction * static_cast<double>(epoch_samples));
    if (count > allowed)
      throw ConfigError(
          std::to_string(count) + " bad records in epoch " + std::to_string(epoch) + " (the last: " + what + ")",
          "at most max_bad_fraction " + json_number(options.max_bad_fraction) + " of the epoch's " +
              std::to_string(epoch_samples) + " samples (" + std::to_string(allowed) + ") skipped",
          "fix the data (the log names each one), or raise max_bad_fraction on this dataset");
  };
  std::vector<uint64_t> seeds;
  seeds.reserve(ids.size());
  for (int64_t i : ids) seeds.push_back(sample_seed(options.seed, epoch, i));
  try {
    FieldBatch made = options.fields ? options.fields->get_batch_with_fields(ids, seeds)
                                     : FieldBatch{dataset.get_batch(ids, seeds), {}};
    Batch& batch = made.batch;
    if (batch.indices.empty()) batch.indices = ids;
    if (batch.indices != ids)
      throw ConfigError("get_batch returned a batch of " + std::to_string(batch.indices.size()) + " indices for the " +
                            std::to_string(ids.size()) + " asked for (sample " + std::to_string(ids[0]) + " on)",
                        "expected Batch::indices to be the indices asked for, in order", "");
    size_t at = 0;
    const auto problem = options.fields ? sample_field_problem(made, ids, info, &at) : std::nullopt;
    if (!problem) return made;
    if (!options.skip_bad_records)
      throw ConfigError("sample " + std::to_string(ids[at]) + ": " + *problem, "expected a readable record",
                        options.bad_record_hint);
    // Skip that one (and find any other) sample by sample.
  } catch (const BadRecord&) {
    // Find the bad ones sample by sample.
  }
  // Sample by sample, collated by the SDK's rule (trainyard::collate: a
  // shape that differs is named with both samples).
  std::vector<FieldExample> samples;
  std::vector<int64_t> kept;
  for (size_t k = 0; k < ids.size(); ++k) {
    const int64_t i = ids[k];
    try {
      FieldExample e = options.fields ? options.fields->get_with_fields(i, seeds[k])
                                      : FieldExample{dataset.get_seeded(i, seeds[k]), {}};
      // One sample's fields, checked as a batch of one.
      size_t at = 0;
      if (options.fields)
        if (const auto problem = sample_field_problem(collate({e}, {i}), {i}, info, &at)) throw BadRecord(*problem);
      samples.push_back(std::move(e));
      kept.push_back(i);
    } catch (const BadRecord& e) {
      bad(i, e);
    }
  }
  if (kept.empty()) return std::nullopt;
  return collate(std::move(samples), std::move(kept));
}

std::optional<FieldBatch> assemble(const Dataset& dataset, const std::vector<int64_t>& ids, int64_t epoch,
                                   const LoaderOptions& options, LoaderStats* stats, const DatasetInfo& info,
                                   int64_t epoch_samples) {
  std::optional<FieldBatch> batch;
  try {
    batch = assemble_unchecked(dataset, ids, epoch, options, stats, epoch_samples, info);
  } catch (const std::bad_alloc&) {
    throw ConfigError(
        "a batch of " + std::to_string(ids.size()) + " samples (sample " + std::to_string(ids[0]) +
            " on) does not fit in memory",
        "samples small enough for batches of " + std::to_string(options.batch_size) +
            (info.sample_shape.empty() ? "" : " (the dataset declares " + shape_text(info.sample_shape) + ")"),
        "check the dataset's image sizes (load_size, crop_size) and loop.batch_per_device");
  }
  if (batch) check_batch(batch->batch, batch->batch.indices, info, batch->fields.count(field_name::box_labels) != 0);
  return batch;
}

// Decode threads fill a map of batch number -> result, at most `prefetch`
// plus one per thread batches ahead of the consumer, who takes them strictly
// in order. (One per thread: each needs a batch of its own to work on; with
// a smaller window, threads idle while the slowest finishes.)
class Pipeline {
 public:
  Pipeline(const Dataset& dataset, std::vector<int64_t> order, int64_t epoch, int64_t first_batch,
           const LoaderOptions& options, std::shared_ptr<LoaderStats> stats)
      : dataset_(dataset),
        info_(dataset.info()),
        order_(std::move(order)),
        epoch_(epoch),
        options_(options),
        stats_(std::move(stats)) {
    const int64_t n = static_cast<int64_t>(order_.size()), b = options_.batch_size;
    total_ = options_.drop_last ? n / b : (n + b - 1) / b;
    next_claim_ = next_take_ = first_batch;
    if (DeviceCopy::applies(options_.device)) copy_ = std::make_unique<DeviceCopy>(options_.device);
    for (int t = 0; t < options_.threads; ++t) workers_.emplace_back([this] { work(); });
  }
  ~Pipeline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    space_.notify_all();
    for (auto& w : workers_) w.join();
  }

  std::optional<Batch> next() {
    std::optional<FieldBatch> out;
    if (!copy_) {
      out = finish(next_on_host());
    } else {
      // To a GPU: the copy of the following batch is started before this one
      // is handed out, so it overlaps this batch's step. Its fields (small)
      // wait beside it and go in finish(), after the copy's stream.
      if (!copy_->pending()) {
        auto first = next_on_host();
        if (!first) return std::nullopt;
        start_copy(std::move(*first));
      }
      FieldBatch ready{copy_->take(), std::move(copying_fields_)};
      if (auto following = next_on_host()) start_copy(std::move(*following));
      out = finish(std::move(ready));
    }
    if (!out) return std::nullopt;
    if (options_.fields_beside) options_.fields_beside->hand_out(out->batch, std::move(out->fields));
    return std::move(out->batch);
  }

 private:
  struct Result {
    std::optional<FieldBatch> batch;
    std::exception_ptr error;
  };

  void start_copy(FieldBatch batch) {
    copying_fields_ = std::move(batch.fields);
    copy_->start(std::move(batch.batch));
  }

  // Memory format and device for a batch the copier did not move, then
  // 8-bit pixels to float on the device (after the copy: a quarter of the bytes).
  std::optional<FieldBatch> finish(std::optional<FieldBatch> made) {
    if (!made) return made;
    Batch* batch = &made->batch;
    if (options_.channels_last && batch->input.dim() == 4)  // to(): see the weights in train/components.cpp
      batch->input = batch->input.to(batch->input.options(), false, false, at::MemoryFormat::ChannelsLast);
    if (batch->input.device() != options_.device) {
      batch->input = batch->input.to(options_.device, /*non_blocking=*/true);
      batch->target = batch->target.to(options_.device, /*non_blocking=*/true);
    }
    for (auto& [name, field] : made->fields)
      if (field.values.device() != options_.device) field.values = field.values.to(options_.device, true);
    if (options_.normalization && batch->input.scalar_type() == at::kByte)
      batch->input = normalize_pixels(batch->input, *options_.normalization);
    return made;
  }

  std::optional<FieldBatch> next_on_host() {
    while (next_take_ < total_) {
      std::optional<FieldBatch> batch;
      if (workers_.empty()) {
        batch = produce(next_take_);
      } else {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_cv_.wait(lock, [&] { return ready_.count(next_take_) != 0; });
        Result r = std::move(ready_[next_take_]);
        ready_.erase(next_take_);
        lock.unlock();
        space_.notify_all();
        if (r.error) {
          ++next_take_;
          std::rethrow_exception(r.error);
        }
        batch = std::move(r.batch);
      }
      ++next_take_;
      if (!batch) continue;  // all of it was skipped
      return batch;
    }
    return std::nullopt;
  }

  // On a decode thread: the batch, pinned when it goes to a GPU.
  std::optional<FieldBatch> produce(int64_t b) {
    const size_t start = static_cast<size_t>(b * options_.batch_size);
    const size_t end = std::min(order_.size(), start + static_cast<size_t>(options_.batch_size));
    std::vector<int64_t> ids(order_.begin() + static_cast<std::ptrdiff_t>(start),
                             order_.begin() + static_cast<std::ptrdiff_t>(end));
    auto batch = assemble(dataset_, ids, epoch_, options_, stats_.get(), info_, static_cast<int64_t>(order_.size()));
    if (batch && copy_) pin(batch->batch), pin(batch->fields);
    return batch;
  }

  void work() {
    running_component() = options_.owner;
    use_one_aten_thread_on_this_thread();  // the decode threads are the parallelism
    while (true) {
      int64_t b;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        space_.wait(lock, [&] {
          return stopping_ || next_claim_ >= total_ || next_claim_ < next_take_ + options_.prefetch + options_.threads;
        });
        if (stopping_ || next_claim_ >= total_) return;
        b = next_claim_++;
      }
      Result r;
      try {
        r.batch = produce(b);
      } catch (...) {
        r.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_[b] = std::move(r);
      }
      ready_cv_.notify_all();
    }
  }

  const Dataset& dataset_;
  const DatasetInfo info_;  ///< what every batch is checked against
  const std::vector<int64_t> order_;
  const int64_t epoch_;
  const LoaderOptions options_;
  std::shared_ptr<LoaderStats> stats_;
  int64_t total_ = 0, next_claim_ = 0, next_take_ = 0;
  std::mutex mutex_;
  std::condition_variable ready_cv_, space_;
  std::map<int64_t, Result> ready_;
  bool stopping_ = false;
  std::unique_ptr<DeviceCopy> copy_;  ///< CUDA devices only
  Fields copying_fields_;             ///< the fields of the batch copy_ holds
  std::vector<std::thread> workers_;
};

}  // namespace

std::string LoaderStats::first_bad() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return first_bad_;
}

void LoaderStats::note_bad(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (first_bad_.empty()) first_bad_ = reason;
}

void LoaderStats::reset() {
  bad_records = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  first_bad_.clear();
}

uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index) {
  return mix(mix(mix(seed) ^ static_cast<uint64_t>(epoch)) ^ static_cast<uint64_t>(index));
}

BatchStream batch_stream(const Dataset& dataset, std::vector<int64_t> indices, int64_t epoch, int64_t first_batch,
                         const LoaderOptions& options, std::shared_ptr<LoaderStats> stats) {
  if (options.streamed) {
    // The dataset orders and shards its stream itself: positions, not indices.
    std::iota(indices.begin(), indices.end(), 0);
    dataset.begin_pass(epoch,
                       std::min<int64_t>(first_batch * options.batch_size, static_cast<int64_t>(indices.size())));
  }
  auto pipeline =
      std::make_shared<Pipeline>(dataset, std::move(indices), epoch, first_batch, options, std::move(stats));
  return [pipeline]() { return pipeline->next(); };
}

BatchStream batch_stream(const Dataset& dataset, const Sampler& sampler, const LoaderOptions& options,
                         std::shared_ptr<LoaderStats> stats) {
  const SamplerState at = sampler.state();
  return batch_stream(dataset, sampler.order(), at.epoch, at.position, options, std::move(stats));
}

}  // namespace trainyard::host
