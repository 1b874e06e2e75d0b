#pragma once
// Finding where a NaN or an infinity came from: the `--debug` run option and
// the `loop.nonfinite` policy use it to name a parameter, a gradient, or the
// first operation of a forward pass whose output was not finite.
#include <string>
#include <vector>

#include "train/checkpoint.h"
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

/// "iteration 6 (epoch 1, batch 6)": where a non-finite update happened.
std::string iteration_text(const LoopPosition& at);
/// A gradient norm in a message: "NaN", "inf" or the number.
std::string norm_text(double norm);

/// Why a run stops on a non-finite update, for nonfinite_stop_message.
struct NonFiniteStopReport {
  std::string at;        ///< iteration_text of the update that reached the policy's limit
  std::string cause;     ///< "non-finite loss; ...", "non-finite gradients (global norm NaN) in ..."
  int64_t in_a_row = 0;  ///< loop.nonfinite skip: the updates in a row that reached the limit; 0 under error
  /// Checks kept on the device: when the host learned of it ("read at
  /// iteration 8 (loop.update_checks_every 4), the 2 updates after it
  /// skipped too"); empty where the host checks each update.
  std::string read;
};
/// The one message a run stops with under loop.nonfinite (error, or skip's
/// limit), wherever its checks ran: the update, the cause, what is
/// checkpointed and what to change.
std::string nonfinite_stop_message(const NonFiniteStopReport& report);

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
