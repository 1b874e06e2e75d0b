#pragma once
/// Network components: a torch::nn::Module the host trains.
///
/// Register parameters and submodules in the constructor, in a fixed order
/// (the seed then gives the same weights on every build). forward() receives
/// the whole batch so a network may use several inputs; most read batch.input.
///
/// Example:
///   class Linear : public trainyard::Network {
///    public:
///     Linear(int64_t in, int64_t out) : fc_(register_module("fc", torch::nn::Linear(in, out))) {}
///     at::Tensor forward(const trainyard::Batch& b) override { return fc_(b.input.flatten(1)); }
///    private:
///     torch::nn::Linear fc_;
///   };

#include <torch/nn/module.h>

#include "trainyard/batch.h"

namespace trainyard {

class Network : public torch::nn::Module {
 public:
  ~Network() override;
  /// Outputs for the batch, e.g. logits {batch, classes}.
  virtual at::Tensor forward(const Batch& batch) = 0;
};

}  // namespace trainyard
