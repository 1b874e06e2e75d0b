#include "config/step_rules.h"

namespace trainyard::host {

std::string why_checks_read_every_update(const CheckPlacementFacts& f) {
  if (f.checks_every && *f.checks_every <= 1) return "loop.update_checks_every is 1";
  if (f.loss_scaler) return "fp16-mixed's loss scaler reads the gradients on the host at every update";
  if (f.debug) return "--debug checks every loss and update on the host";
  if (f.find_lr) return "find-lr reads each loss on the host";
  if (f.nonfinite != "ignore" && f.optimizer_skips == false)
    return "loop.nonfinite " + f.nonfinite +
           " needs an optimizer that can skip a step on the device (a fused sgd/adam/adamw, or a plugin's "
           "trainyard::SkippableStep)";
  return "";
}

std::optional<CudaGraphRefusal> cuda_graph_refusal(const CudaGraphFacts& run) {
  const std::string with = " with loop.cuda_graph: true";
  if (run.built_with_cuda == false)
    return CudaGraphRefusal{"this trainyard was built against a LibTorch without CUDA",
                            "expected a build with CUDA (docs/building.md), or loop.cuda_graph off"};
  if (!run.cuda)
    return CudaGraphRefusal{"CUDA graphs need a GPU",
                            "expected distributed.num_gpus 1" + with + ", got 0 (training on the CPU)"};
  if (run.world_size && *run.world_size > 1)
    return CudaGraphRefusal{"the run has " + std::to_string(*run.world_size) +
                                " processes; the gradients' all-reduce runs between the captured backward and the "
                                "update, and is not captured yet",
                            "expected one process on one GPU" + with + ", or loop.cuda_graph off"};
  if (run.iter_size != 1)
    return CudaGraphRefusal{"a captured step is one batch's update",
                            "expected loop.iter_size 1" + with + ", got " + std::to_string(run.iter_size)};
  const std::string why = run.checks_read_every_update.value_or(why_checks_read_every_update(run.checks));
  if (!why.empty())
    return CudaGraphRefusal{
        "the update's checks are read on the host at every update (" + why + "), inside the step",
        "expected loop.update_checks_every auto or above 1, precision fp32, bf16-mixed or auto, no --debug, and "
        "under loop.nonfinite error or skip a fused sgd/adam/adamw" +
            with};
  if (run.fixed_sample_shape == false)
    return CudaGraphRefusal{"the datasets give no fixed sample shape",
                            "expected datasets with load_size/crop_size" + with};
  if (run.sample_fields)
    return CudaGraphRefusal{"the training samples carry fields (boxes, ...) of a size that changes from batch to batch",
                            "expected a dataset without fields" + with};
  if (run.train_step_overridden)
    return CudaGraphRefusal{"an additional_override replaces the train_step stage",
                            "expected no override of train_step" + with};
  return std::nullopt;
}

}  // namespace trainyard::host
