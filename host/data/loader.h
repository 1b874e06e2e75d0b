#pragma once
// Turning a dataset into batches: a per-epoch permutation from (seed, epoch),
// batching, and starting mid-epoch without touching the skipped samples.
// (Threaded decoding and sharding by rank come with the data pipeline.)
#include <cstdint>
#include <vector>

#include <c10/core/Device.h>

#include "trainyard/dataset.h"
#include "trainyard/loop.h"

namespace trainyard::host {

struct EpochPlan {
  int64_t dataset_size = 0;
  int64_t samples_per_epoch = 0;  ///< 0: one pass over the dataset
  int64_t batch_size = 1;
  bool shuffle = true;
  bool drop_last = false;
  uint64_t seed = 0;

  /// The sample indices epoch `epoch` visits, in order. Independent of
  /// everything but (seed, epoch): a resumed run sees the same order.
  std::vector<int64_t> indices(int64_t epoch) const;
  int64_t batches_per_epoch() const;
};

/// Batches of `indices`, starting at batch number `first_batch`, moved to `device`.
BatchStream batch_stream(const Dataset& dataset, std::vector<int64_t> indices, int64_t batch_size,
                         int64_t first_batch, bool drop_last, c10::Device device);

}  // namespace trainyard::host
