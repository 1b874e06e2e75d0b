#pragma once
// Finding where a NaN or an infinity came from: the `--debug` run option and
// the `loop.nonfinite` policy use it to name a parameter, a gradient, or the
// first operation of a forward pass whose output was not finite.
#include <string>
#include <vector>

#include "train/guard.h"
#include "trainyard/batch.h"
#include "trainyard/network.h"

namespace trainyard::host {

/// Training stopped on a NaN or an infinity (exit code 1; the message names
/// the step and the cause). Passes through guarded() unchanged.
class NonFiniteStop : public ComponentFailure {
 public:
  using ComponentFailure::ComponentFailure;
};

/// Parameters (and buffers, when asked) holding a NaN or an infinity, by name.
std::vector<std::string> nonfinite_parameters(Network& network, bool with_buffers = true);
/// Parameters whose gradient holds a NaN or an infinity, by name.
std::vector<std::string> nonfinite_gradients(Network& network);

/// Runs network.forward(batch) again (no gradients) watching every ATen
/// operation it calls from the top level, and describes the first one whose
/// output is not finite: "aten::log (after layer 'fc1', the last with
/// parameters; its inputs were finite)". "" if the forward pass is finite.
std::string locate_nonfinite_forward(Network& network, const Batch& batch);

/// A whole diagnosis for a non-finite loss at this batch: bad parameters, or
/// the forward operation (naming the network, `network_label`, whose output
/// was not finite), or a finite output so extreme that the loss overflowed on
/// it (the network named too), or else the loss.
std::string diagnose_nonfinite_loss(Network& network, const Batch& batch, const at::Tensor& output,
                                    const std::string& loss_name, const std::string& network_label);

}  // namespace trainyard::host
