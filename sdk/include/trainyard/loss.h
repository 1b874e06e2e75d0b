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

/// Since SDK 1.3, optional: a loss that compares the network's outputs with
/// one another (metric learning: triplet, contrastive) rather than scoring
/// classes also derives from EmbeddingLoss. The host then asks the network
/// for one embedding per sample, `[batch, size]` of any size, instead of one
/// score per class. Found with dynamic_cast.
///
/// Example:
///   class Triplet : public trainyard::Loss, public trainyard::EmbeddingLoss { ... };
class EmbeddingLoss {
 public:
  virtual ~EmbeddingLoss();
};

}  // namespace trainyard
