#pragma once
// Turning a dataset into batches: a Sampler's order of indices (a per-epoch
// permutation from (seed, epoch), sharded by rank: data/sampler.h), decode
// threads with a bounded prefetch queue, collation, starting mid-epoch without touching the skipped samples, and the bad-record
// policy. Batches depend only on (seed, epoch, rank, position): never on the
// number of threads.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "data/batch_fields.h"
#include "data/sampler.h"
#include "trainyard/dataset.h"
#include "trainyard/loop.h"

namespace trainyard::host {

/// Class labels outside 0..num_classes-1: the first one's position in the
/// labels and its value, and how many there are; nothing when all are in
/// range (then one min/max scan, in place for a CPU tensor: cheap per batch).
struct LabelOutOfRange {
  int64_t position = 0, label = 0, count = 0;
};
std::optional<LabelOutOfRange> first_label_out_of_range(const at::Tensor& labels, int64_t num_classes);

struct LoaderOptions {
  int64_t batch_size = 1;
  bool drop_last = false;
  int threads = 0;    ///< decode threads; 0 decodes on the calling thread
  int prefetch = 4;   ///< batches kept ahead of the consumer besides one per decode thread
  uint64_t seed = 0;  ///< experiment seed, for per-sample augmentation seeds
  bool skip_bad_records = false;
  /// Said after a bad record that stops the pass (not skipped): how to go on.
  /// Inputs that are not a configured dataset (predict, embed, search) have
  /// no on_bad_record to set and say so with their own words, or none.
  std::string bad_record_hint =
      "fix the data, or set on_bad_record: skip on this dataset to skip and count such samples";
  /// With skip_bad_records: the share of an epoch's samples (this rank's)
  /// that may be skipped; one more stops with ConfigError.
  double max_bad_fraction = 1.0;
  c10::Device device = c10::Device(c10::DeviceType::CPU);  ///< CUDA: pinned, copied on a side stream (DeviceCopy)
  bool channels_last = false;   ///< 4-d inputs in channels-last memory format (network.memory_format)
  const char* owner = nullptr;  ///< the dataset entry's crash label, for crash reports from decode threads
  /// The dataset's Dataset::input_normalization (SDK 1.2 plugins): uint8
  /// inputs become float on `device`, once per batch, as the consumer takes it.
  std::optional<InputNormalization> normalization;
  /// The dataset is read in order (Dataset::streamed, SDK 1.2): the indices
  /// given are only counted, this rank's positions 0..n-1 are asked for, and
  /// begin_pass(epoch, first position) comes first.
  bool streamed = false;
  /// The dataset's FieldDataset (SDK 1.5): batches are read with their
  /// fields, which are checked (a sample at fault is a bad record), pinned
  /// and moved to `device` with the batch (ragged counts stay on the CPU).
  const FieldDataset* fields = nullptr;
  /// Where each handed-out batch's fields are kept for its consumer (empty
  /// for a dataset without fields).
  std::shared_ptr<FieldsBeside> fields_beside = std::make_shared<FieldsBeside>();
};

struct LoaderStats {
  std::atomic<int64_t> bad_records{0};
  /// The first skipped record's reason since the last reset(), for the report.
  std::string first_bad() const;
  void note_bad(const std::string& reason);
  void reset();

 private:
  mutable std::mutex mutex_;
  std::string first_bad_;
};

/// The augmentation seed of one sample: a hash of (seed, epoch, index).
uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index);

/// Batches of `indices` for `epoch`, starting at batch number `first_batch`.
/// A bad record either throws ConfigError naming the sample (default) or is
/// skipped and counted in `stats`.
BatchStream batch_stream(const Dataset& dataset, std::vector<int64_t> indices, int64_t epoch, int64_t first_batch,
                         const LoaderOptions& options, std::shared_ptr<LoaderStats> stats = nullptr);
/// The sampler's current epoch from its position (state()): what training
/// reads. `options.batch_size` must be the sampler's batch_size().
BatchStream batch_stream(const Dataset& dataset, const Sampler& sampler, const LoaderOptions& options,
                         std::shared_ptr<LoaderStats> stats = nullptr);

}  // namespace trainyard::host
