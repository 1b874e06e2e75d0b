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

}  // namespace trainyard
