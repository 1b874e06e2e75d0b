#pragma once
// loop.nonfinite's policy and the update's gradient norm, in one of two
// forms chosen once when the run is built (Updater, by the rule in
// config/step_rules.h): checked on the host at every update (host_checks)
// or kept on the device and read every loop.update_checks_every updates
// (device_checks). The Updater asks its policy at each loss and update and
// acts on the verdict; it never asks where the checks run.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "train/components.h"
#include "train/precision.h"
#include "train/update_outcome.h"
#include "trainyard/optimizer.h"

namespace trainyard::host {

/// What a policy decided about an update whose gradients are reduced and
/// unscaled (and clipped, by the policy, since the norm is its check).
struct UpdateVerdict {
  enum class Action { step, drop, stop };
  Action action = Action::step;
  /// step: the optimizer skips its update where this 0-dim tensor is 1
  /// (trainyard::SkippableStep::step_unless); undefined: an ordinary step.
  at::Tensor skip_on_device;
  UpdateOutcome outcome;  ///< what to report (stop: outcome.stop)
};

/// What a policy reads and counts across its life; owned by the Updater, so
/// a policy switched for find-lr continues the run's counts.
struct UpdateCheckParts {
  const UpdateSettings& settings;
  Components& components;
  const Context& context;
  LossScaler& scaler;
  int64_t& skipped_in_a_row;  ///< non-finite updates in a row, as the host knows
  int64_t& skipped_updates;   ///< non-finite updates dropped in the run
};

class UpdateChecks {
 public:
  virtual ~UpdateChecks() = default;
  /// A batch's loss before its backward (`batch` and `output` for a
  /// diagnosis; both outlive the update). --debug throws NonFiniteStop here.
  virtual void loss(const at::Tensor& loss, const Batch& batch, const at::Tensor& output, const UpdateClock& clock) = 0;
  /// The loss of a batch whose backward ran in a captured step.
  virtual void captured_loss(const at::Tensor& loss) = 0;
  /// Clips `grads` (loop.clip_grad_value, clip_grad_norm) and judges the
  /// update; `across_ranks`: the averaged gradients decide, not a rank's own loss.
  virtual UpdateVerdict judge(std::vector<at::Tensor>& grads, const UpdateClock& clock, bool across_ranks) = 0;
  /// After the optimizer's step: --debug checks the parameters; checks kept
  /// on the device are read when due, into `outcome`.
  virtual void stepped(const UpdateClock& clock, UpdateOutcome& outcome) = 0;
  /// The checks kept on the device since the last read, read now (one wait
  /// for the device): as judge() would have reported them. Nothing on the host.
  virtual UpdateOutcome read() { return {}; }
  /// An update dropped or stepped: the losses kept for it are forgotten.
  virtual void forget() = 0;
  /// The checks this policy keeps stay on the device between reads.
  virtual bool on_device() const { return false; }
  /// The global gradient norm before clipping, at the last update judged (or read).
  double grad_norm() const { return grad_norm_; }

 protected:
  double grad_norm_ = 0;
};

/// Checked on the host at every update: `debug` (--debug: every loss read
/// as it comes, the first non-finite one stops with its operation) and
/// `find_lr` (a non-finite update is dropped, never a stop: the finder sees
/// the loss).
std::unique_ptr<UpdateChecks> host_checks(const UpdateCheckParts& parts, bool debug, bool find_lr);
/// Kept on the device: a non-finite update is skipped by `optimizer`'s
/// kernel, the policy's limit halts every later update until the host reads
/// the checks, every `every` updates or at read().
std::unique_ptr<UpdateChecks> device_checks(const UpdateCheckParts& parts, trainyard::SkippableStep* optimizer,
                                            int64_t every);

}  // namespace trainyard::host
