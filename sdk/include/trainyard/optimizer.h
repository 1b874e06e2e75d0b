#pragma once
/// Optimizer components: build a torch::optim::Optimizer over parameter groups.
///
/// The host makes the groups (today one group holding every trainable
/// parameter) and owns checkpointing: save()/load() of the optimizer it gets.
/// The group options the plugin sets (lr, momentum, ...) are the defaults;
/// the host may later change a group's learning rate through
/// OptimizerOptions::set_lr.
///
/// Example:
///   std::unique_ptr<torch::optim::Optimizer> build(
///       std::vector<torch::optim::OptimizerParamGroup> groups) override {
///     return std::make_unique<torch::optim::SGD>(std::move(groups),
///                                                torch::optim::SGDOptions(lr_));
///   }

#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

namespace trainyard {

class Optimizer {
 public:
  virtual ~Optimizer();
  virtual std::unique_ptr<torch::optim::Optimizer> build(std::vector<torch::optim::OptimizerParamGroup> groups) = 0;
};

}  // namespace trainyard
