#pragma once
/// The unit of data that flows from a dataset through the network, the loss
/// and the meters.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace trainyard {

/// One sample as a dataset returns it.
struct Example {
  at::Tensor input;   ///< e.g. float {1, 28, 28}
  at::Tensor target;  ///< e.g. int64 scalar class index
};

/// A collated batch: inputs and targets stacked along a new first dimension.
///
/// Example:
///   Batch b = dataset.get_batch({0, 1, 2});
///   b.input.size(0) == 3;  b.indices == {0, 1, 2};
struct Batch {
  at::Tensor input;
  at::Tensor target;
  std::vector<int64_t> indices;  ///< dataset indices of the samples, in order
  int64_t size() const { return static_cast<int64_t>(indices.size()); }
};

}  // namespace trainyard
