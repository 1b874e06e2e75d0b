#pragma once
/// Loss components: network outputs and a batch in, one scalar out.
///
/// Example:
///   class L1 : public trainyard::Loss {
///     at::Tensor compute(const at::Tensor& out, const trainyard::Batch& b) override {
///       return (out - b.target).abs().mean();
///     }
///   };

#include <ATen/core/Tensor.h>

#include "trainyard/batch.h"

namespace trainyard {

class Loss {
 public:
  virtual ~Loss();
  /// A scalar (0-dim) tensor that requires grad when `output` does.
  virtual at::Tensor compute(const at::Tensor& output, const Batch& batch) = 0;
};

}  // namespace trainyard
