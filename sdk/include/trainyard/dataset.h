#pragma once
/// Dataset components: a finite, indexable collection of samples.
///
/// The host owns batching, shuffling, sharding and resuming: a dataset only
/// answers "how many" and "give me sample i". get() and get_batch() may be
/// called from several threads at once and must not change the dataset.
///
/// Example:
///   class Squares : public trainyard::Dataset {
///    public:
///     int64_t size() const override { return 100; }
///     trainyard::Example get(int64_t i) const override {
///       return {torch::full({1}, float(i)), torch::tensor(int64_t(i % 2))};
///     }
///     trainyard::DatasetInfo info() const override { return {100, 2, {1}, {"even", "odd"}}; }
///   };

#include <cstdint>
#include <vector>

#include "trainyard/batch.h"
#include "trainyard/context.h"

namespace trainyard {

class Dataset {
 public:
  virtual ~Dataset();
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
  /// Several samples at once. The default stacks get(); a dataset held in
  /// memory overrides it with one gather.
  virtual Batch get_batch(const std::vector<int64_t>& indices) const;
  virtual DatasetInfo info() const = 0;
};

/// A dataset whose samples depend on a random seed: augmentation. The host's
/// loader calls get_seeded(index, seed) with seed = hash(experiment seed,
/// epoch, index), so a sample's augmentation is the same whichever thread
/// decodes it and however many threads there are. Added in SDK API 1.1 as a
/// separate interface (the host finds it with dynamic_cast), so that 1.0
/// plugins keep working.
///
/// Example:
///   Example get_seeded(int64_t i, uint64_t seed) const override {
///     std::mt19937_64 rng(seed);
///     return {flip_if(rng() & 1, image(i)), label(i)};
///   }
class SeededDataset : public Dataset {
 public:
  ~SeededDataset() override;
  virtual Example get_seeded(int64_t index, uint64_t seed) const = 0;
  /// Without a seed: the sample as with seed 0.
  Example get(int64_t index) const override { return get_seeded(index, 0); }
};

}  // namespace trainyard
