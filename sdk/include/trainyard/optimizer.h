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

/// Optional (added within SDK 1.4): a torch::optim::Optimizer that can skip
/// a step on the device derives from SkippableStep too, so that the host
/// never waits for the device to learn whether an update was finite. The
/// host computes `found_inf` (a float32 0-dim tensor on the parameters'
/// device: 1 where the update's gradients or losses were not finite, or the
/// run is halting, else 0) and calls step_unless(found_inf) instead of
/// step(); the host reads the flag later (loop.update_checks_every) and then
/// calls steps_skipped() when some steps were skipped. ATen's fused kernels
/// take such a flag (`found_inf` of _fused_sgd_, _fused_adam_, ...), as
/// PyTorch's GradScaler passes it. Found with dynamic_cast; an optimizer
/// without it steps after the host has read the flag (one wait for the
/// device per update).
///
/// Example:
///   class MySgd : public torch::optim::SGD, public trainyard::SkippableStep {
///     void step_unless(const at::Tensor& found_inf) override {
///       // ... at::_fused_sgd_(..., /*grad_scale=*/{}, /*found_inf=*/found_inf);
///     }
///     void steps_skipped() override {}  // nothing counted on the host
///   };
class SkippableStep {
 public:
  virtual ~SkippableStep();
  /// One step, except where `found_inf` holds 1: then the parameters and
  /// every state tensor stay exactly as they were. Must not read the flag
  /// on the host where the parameters are on a GPU.
  virtual void step_unless(const at::Tensor& found_inf) = 0;
  /// Some steps since the last call were skipped on the device: put any
  /// count kept on the host (a step number in the state) back in line with
  /// the device's. Reading the device here is allowed.
  virtual void steps_skipped() = 0;
};

}  // namespace trainyard
