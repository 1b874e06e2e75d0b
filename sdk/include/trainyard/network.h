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
  /// Before training (and before each stage, eval and predict) the host
  /// calls forward once per split on a few samples in eval mode under
  /// no_grad, to check the output's shape against the dataset (the wiring
  /// check): count calls or change state only in training mode.
  virtual at::Tensor forward(const Batch& batch) = 0;
};

}  // namespace trainyard
