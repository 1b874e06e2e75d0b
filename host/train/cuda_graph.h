#pragma once
// loop.cuda_graph: a training step's forward, loss and backward captured once
// as a CUDA graph and replayed at every later step with the same shapes, so
// that the host launches one graph instead of a thousand kernels (PyTorch's
// "whole-network capture", torch.cuda.graph). The optimizer's update stays
// outside the graph: fused, it is a few launches, and its learning rate and
// step counts change on the host.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "trainyard/batch.h"

namespace trainyard::host {

/// The rule a replay checks its gradients by: `captured[i]` is where the
/// capture left parameter i's gradient, nullptr where the loss never reached
/// the parameter (an unused head, a branch only eval takes): such a parameter
/// gets no gradient from the graph, as from an eager step, and is not
/// checked. The index of the first captured gradient that is no longer the
/// parameter's, if any.
std::optional<size_t> replaced_gradient(const std::vector<at::Tensor>& parameters,
                                        const std::vector<const void*>& captured);

/// How many steps run eagerly before the capture: `warmup` (3), and never
/// before `profile_skip` steps, the first one `--profile` records: the
/// profiler runs before the capture, the order PyTorch supports
/// (pytorch#75504: a profiler started after a capture could not see or crash
/// the graph's launches).
int64_t capture_warmup(int64_t profile_skip, int64_t warmup = 3);

/// The forward, loss and backward of one batch: {output, loss}.
struct StepTensors {
  at::Tensor output, loss;
};

/// One training step as a CUDA graph. The first `warmup` calls run the step
/// eagerly on the capture's stream (cuDNN's autotuner, cuBLAS's workspaces
/// and the allocator settle there, as PyTorch's whole-network capture asks);
/// the next captures it on that stream with the parameters' gradients unset,
/// so that the graph writes every gradient into memory of its own pool, then
/// replays it; every later call copies the batch into the graph's input
/// tensors and replays. The gradients stay those tensors for the rest of the
/// run: a replay overwrites them (nothing needs zeroing), and a call that finds
/// one replaced (a callback's zero_grad(set_to_none)) throws rather than train
/// on nothing. A step that cannot be captured (a loss or network that reads
/// the device: .item(), masked_select, nonzero) ends its capture cleanly: the
/// stream leaves capture mode, the allocators stop routing to the graph's
/// pool and release it, the partial gradients are dropped, and the run goes
/// on eagerly (run() gives nothing from then on; failure() says why, naming
/// the component). Only for CUDA builds; construct it only where
/// cuda_graph_refusal() (config/step_rules.h) refused nothing.
class CapturedStep {
 public:
  using Step = std::function<StepTensors(const Batch&)>;
  CapturedStep(c10::Device device, std::vector<at::Tensor> parameters, int64_t warmup = 3);
  ~CapturedStep();
  CapturedStep(const CapturedStep&) = delete;
  CapturedStep& operator=(const CapturedStep&) = delete;

  /// The step on `batch`: eagerly while warming up, captured, or replayed.
  /// Nothing (the caller runs the step eagerly) for a batch of other shapes
  /// than the captured one (an epoch's shorter last batch). The tensors
  /// returned after a capture are the graph's own: the next replay overwrites them.
  std::optional<StepTensors> run(const Batch& batch, const Step& step);
  bool captured() const;
  /// Why the capture failed (the step runs eagerly since), or "".
  const std::string& failure() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainyard::host
