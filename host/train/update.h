#pragma once
// One optimizer update, from the backward passes it accumulates to the
// optimizer's step: gradients averaged over ranks, rescaled for a short
// accumulation, unscaled (fp16-mixed's loss scaler), clipped, checked for
// NaN/inf under loop.nonfinite, the schedule's rate set, one step. It knows
// nothing of the loop: finish() returns what happened and the EpochLoop acts.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "train/components.h"
#include "train/precision.h"
#include "train/update_outcome.h"
#include "trainyard/optimizer.h"

namespace trainyard::host {

class GradientReducer;
class UpdateChecks;

class Updater {
 public:
  Updater(UpdateSettings settings, Components& components, const Context& context);
  ~Updater();

  /// Data parallel: gradients go through `reducer`; a rank's own non-finite
  /// loss no longer decides alone (the averaged gradients do).
  void set_reducer(GradientReducer* reducer) { reducer_ = reducer; }
  /// --debug: every loss and update checked on the host (set as the run is built).
  void set_debug(bool on);
  bool debug() const { return debug_; }
  /// loop.cuda_graph: the gradients are the captured graph's tensors, which
  /// each replay overwrites: a new update neither unsets nor zeroes them.
  void set_gradients_kept(bool on) { gradients_kept_ = on; }
  bool gradients_kept() const { return gradients_kept_; }
  /// Zeroes every gradient where it is (a step the graph does not fit adds into them).
  void zero_gradients_in_place();

  /// Before a batch's forward: the first batch of an update zeroes the gradients.
  void begin_batch();
  /// Backward of one batch's loss, weighted 1/iter_size (and scaled for
  /// fp16). The loss goes to the non-finite policy first; under --debug a
  /// non-finite one stops here, naming the operation that made it.
  void backward(const at::Tensor& loss, const Batch& batch, const at::Tensor& output, const UpdateClock& clock);
  /// A rank with no batch left takes part in the others' update with zero
  /// gradients; with synchronized batch norm, `forward` (in the run's
  /// precision) and backward run on an empty batch for its collectives.
  void backward_nothing(const std::function<at::Tensor(const Batch&)>& forward);
  /// A backward that ran elsewhere (a captured step, loop.cuda_graph) of a
  /// batch with this `loss`: counted, and the loss kept for the update's checks.
  void backward_done(const at::Tensor& loss);
  bool due() const { return micro_ == s_.iter_size; }  ///< iter_size batches accumulated
  bool pending() const { return micro_ > 0; }          ///< an accumulation is under way
  /// Ends the update: gradients reduced and unscaled, clipped and judged by
  /// the non-finite policy (update_checks.h), the rate from `schedule`, the
  /// optimizer's step (skipped on the device where the policy keeps its
  /// checks there: learned of at its next read).
  UpdateOutcome finish(const UpdateClock& clock, const ScheduleFactor& schedule);
  /// Reads the checks kept on the device since the last read (one wait for
  /// the device; nothing when none are unread or the host checks each
  /// update): the gradient norm, and for loop.nonfinite the updates skipped
  /// or why to stop (outcome.stop), as finish() reports them. The loop's
  /// "update check reads" hook calls it before the norm is logged or a
  /// checkpoint written.
  UpdateOutcome read_checks();
  /// "" when this run's checks stay on the device between reads, else why
  /// the host reads them at every update (config/step_rules.h).
  const std::string& why_checks_read_every_update() const { return checks_on_host_because_; }
  int64_t update_checks_every() const { return checks_every_; }  ///< resolved (auto: from the device)

  double grad_norm() const;  ///< before clipping, at the last update read
  double lr() const;         ///< the first group's current rate
  LossScaler& scaler() { return scaler_; }
  const LossScaler& scaler() const { return scaler_; }
  /// find-lr: every update at this rate (groups keep their ratios to the
  /// first group) instead of the schedule's, checked on the host; nullopt
  /// puts the starting rates and the run's checks back.
  void set_fixed_lr(std::optional<double> lr);
  /// The starting rate of the first group (schedules scale it).
  double base_lr() const { return base_lrs_.empty() ? 0 : base_lrs_[0]; }

 private:
  /// The non-finite policy for the run as it is now set (debug, find-lr):
  /// chosen by the rule in config/step_rules.h, at construction and at
  /// those two switches only.
  void choose_checks();
  void apply_schedule(const UpdateClock& clock, const ScheduleFactor& schedule);
  void drop_update(std::vector<at::Tensor>& grads);
  std::vector<at::Tensor> gradients();  ///< the parameters' gradients that are defined

  const UpdateSettings s_;
  Components& c_;
  const Context& context_;
  GradientReducer* reducer_ = nullptr;
  bool debug_ = false;
  bool gradients_kept_ = false;
  /// The network's parameters, listed once (loading a checkpoint keeps the
  /// same tensors): finish() reads their gradients at every update.
  std::vector<at::Tensor> parameters_;
  std::vector<double> base_lrs_;    ///< each group's starting learning rate
  std::optional<double> fixed_lr_;  ///< find-lr: overrides the schedule
  LossScaler scaler_;               ///< fp16-mixed only
  int64_t micro_ = 0;               ///< backward passes accumulated into the coming update
  int64_t checks_every_ = 1;
  trainyard::SkippableStep* skippable_ = nullptr;       ///< the optimizer, where it can skip on the device
  int64_t skipped_in_a_row_ = 0, skipped_updates_ = 0;  ///< the policy's counts (UpdateCheckParts)
  std::unique_ptr<UpdateChecks> checks_;                ///< the non-finite policy (choose_checks)
  std::string checks_on_host_because_;                  ///< why_checks_read_every_update()
};

}  // namespace trainyard::host
