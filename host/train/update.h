#pragma once
// One optimizer update, from the backward passes it accumulates to the
// optimizer's step: gradients averaged over ranks, rescaled for a short
// accumulation, unscaled (fp16-mixed's loss scaler), clipped, checked for
// NaN/inf under loop.nonfinite, the schedule's rate set, one step. It knows
// nothing of the loop: finish() returns what happened and the EpochLoop acts.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "config/sections.h"
#include "train/checkpoint.h"
#include "train/components.h"
#include "train/precision.h"
#include "trainyard/loop.h"
#include "trainyard/optimizer.h"

namespace trainyard::host {

class GradientReducer;

/// Clamps every gradient to [-max_value, max_value] (0: no clamp), then scales
/// them all down to a global L2 norm of at most max_norm (0: no scaling).
/// Returns the global norm after clamping and before scaling. `poison`, if
/// given, is added to the squared norm in the same read (see squared_norm).
double clip_gradients(std::vector<at::Tensor>& grads, double max_value, double max_norm, const at::Tensor& poison = {});

/// Where the loop stands: for the schedule's step and for messages.
struct UpdateClock {
  LoopPosition at;
  int64_t stage_first_epoch = 0, stage_first_iteration = 0;
  int64_t batches_per_epoch = 0;  ///< of the epoch plan
};

/// What an optimizer update did (Updater::finish): the caller applies it to
/// the loop (values, hooks, a stop), so the Updater needs nothing of the loop.
struct UpdateOutcome {
  bool stepped = false;  ///< false: skipped (fp16 overflow, a non-finite update under nonfinite: skip, find-lr)
  double grad_norm = 0;  ///< global gradient norm before clipping
  double lr = 0;         ///< the first group's rate the step used
  std::optional<double> loss_scale;              ///< fp16-mixed: the scale after this update
  std::optional<double> scaler_skipped_updates;  ///< fp16-mixed: overflowed updates so far, when this one overflowed
  std::optional<double> skipped_updates;         ///< nonfinite: skip: non-finite updates dropped so far
  /// Checks kept on the device: 1 where the optimizer skipped this update (a
  /// 0-dim tensor, not read); undefined where the host checks each update.
  at::Tensor skipped_on_device;
  bool checks_read = false;     ///< the checks kept on the device were read (Updater::read_checks)
  int64_t skipped_in_read = 0;  ///< ... and this many of the updates since the last read were skipped
  /// Not empty: a non-finite update the policy does not skip. The weights are
  /// still the last good update's: the caller checkpoints them at this batch
  /// and stops with this message (NonFiniteStop).
  std::string stop;
};

/// The learning-rate factor at an update: the loop's `schedule` stage.
using ScheduleFactor = std::function<double(int64_t step, int64_t total)>;

/// What an Updater takes from the experiment (UpdateSettings::from reads
/// the sections); the rest of it is not the update's business.
struct UpdateSettings {
  int64_t iter_size = 1;             ///< loop.iter_size: batches accumulated per update
  std::string precision = "fp32";    ///< loop.effective_precision(): fp16-mixed scales the loss
  double clip_grad_norm = 0;         ///< loop.clip_grad_norm: 0, no clipping by global norm
  double clip_grad_value = 0;        ///< loop.clip_grad_value: 0, no clipping by value
  std::string nonfinite = "error";   ///< loop.nonfinite: error | skip | ignore
  int64_t nonfinite_max_skips = 10;  ///< loop.nonfinite_max_skips: skips in a row before stopping
  int64_t epochs = 1;                ///< loop.epochs: the schedule's length
  bool schedule_per_epoch = false;   ///< schedule.unit is epoch (else the step counts updates)
  std::string loss_plugin;           ///< loss.plugin: named in a non-finite loss's diagnosis
  /// loop.update_checks_every: updates between the host's reads of the
  /// checks kept on the device; 0 (auto): 1 on the CPU, else one read per
  /// train log line (log_every_iters / iter_size updates).
  int64_t update_checks_every = 0;
  int64_t log_every_iters = 50;  ///< loop.log_every_iters: auto's interval on a GPU

  /// The fields from the loop and schedule sections and the loss entry's plugin.
  static UpdateSettings from(const LoopConfig& loop, const ScheduleConfig& schedule, const std::string& loss_plugin);
};

class Updater {
 public:
  Updater(UpdateSettings settings, Components& components, const Context& context);

  /// Data parallel: gradients go through `reducer`; a rank's own non-finite
  /// loss no longer decides alone (the averaged gradients do).
  void set_reducer(GradientReducer* reducer) { reducer_ = reducer; }
  void set_debug(bool on) { debug_ = on; }
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
  /// fp16). A non-finite loss is remembered for the policy; under --debug it
  /// stops here, naming the operation that made it.
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
  /// Ends the update: gradients reduced, unscaled, clipped and checked, the
  /// rate from `schedule`, the optimizer's step. With checks kept on the
  /// device (checks_on_device()), a non-finite update is skipped there and
  /// learned of at the next read: every update_checks_every updates here,
  /// or at read_checks().
  UpdateOutcome finish(const UpdateClock& clock, const ScheduleFactor& schedule);
  /// Reads the checks kept on the device since the last read (one wait for
  /// the device; nothing when none are unread): the gradient norm, and for
  /// loop.nonfinite the updates skipped or why to stop (outcome.stop), as
  /// finish() reports them. The loop calls it before it logs the norm or
  /// writes a checkpoint.
  UpdateOutcome read_checks();
  /// Whether the next update keeps its checks on the device: update_checks_every
  /// above 1, fp32 or bf16, not --debug or find-lr, and under loop.nonfinite
  /// error or skip an optimizer that can skip a step on the device
  /// (trainyard::SkippableStep).
  bool checks_on_device() const;
  int64_t update_checks_every() const { return checks_every_; }  ///< resolved (auto: from the device)

  double grad_norm() const { return grad_norm_; }  ///< before clipping, at the last update read
  double lr() const;                               ///< the first group's current rate
  LossScaler& scaler() { return scaler_; }
  const LossScaler& scaler() const { return scaler_; }
  /// Every update at this rate (groups keep their ratios to the first
  /// group) instead of the schedule's; nullopt puts the starting rates back.
  void set_fixed_lr(std::optional<double> lr);
  /// The starting rate of the first group (schedules scale it).
  double base_lr() const { return base_lrs_.empty() ? 0 : base_lrs_[0]; }

 private:
  void apply_schedule(const UpdateClock& clock, const ScheduleFactor& schedule);
  /// A non-finite loss or gradient: the update skipped (outcome.skipped_updates
  /// set), or why to stop (outcome.stop); under --debug, throws NonFiniteStop.
  void handle_nonfinite(const UpdateClock& clock, UpdateOutcome& outcome);
  void drop_update(std::vector<at::Tensor>& grads);
  std::vector<at::Tensor> gradients();  ///< the parameters' gradients that are defined
  /// finish() with the checks kept on the device.
  UpdateOutcome finish_on_device(std::vector<at::Tensor>& grads, const UpdateClock& clock,
                                 const ScheduleFactor& schedule);

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
  double grad_norm_ = 0;
  /// The losses of the coming update's batches and their outputs, read at
  /// finish() with the gradient norm (fp32 and bf16 runs, not --debug).
  std::vector<at::Tensor> pending_losses_, pending_outputs_;
  /// NaN when a pending loss is not finite, else 0, on the losses' device (undefined: none, or across ranks).
  at::Tensor pending_loss_poison() const;
  /// The norm was not finite: finds the first non-finite pending loss (loss_finite_, last_output_).
  void resolve_pending_losses();
  /// The checks kept on the device (finish_on_device), read by read_checks():
  /// 0-dim tensors on the gradients' device.
  struct DeviceChecks {
    at::Tensor norm;            ///< double: the last update's gradient norm
    at::Tensor in_a_row;        ///< float: non-finite updates in a row (across reads)
    at::Tensor halted;          ///< float: 1 once the policy stops (error: the first; skip: max_skips in a row)
    at::Tensor before_halt;     ///< float: updates since the last read before the halting one
    at::Tensor skipped;         ///< float: non-finite updates skipped since the last read
    at::Tensor loss_nonfinite;  ///< float: the halting update's losses were not all finite (single process)
  };
  DeviceChecks checks_;
  std::vector<UpdateClock> unread_;  ///< the clocks of the updates since the last read, in order
  int64_t checks_every_ = 1;
  trainyard::SkippableStep* skippable_ = nullptr;  ///< the optimizer, where it can skip on the device
  bool loss_finite_ = true;                        ///< every loss of the coming update was finite
  const Batch* batch_ = nullptr;                   ///< the batch of a non-finite loss (for diagnoses)
  at::Tensor last_output_;                         ///< its output
  int64_t skipped_in_a_row_ = 0, skipped_updates_ = 0;
};

}  // namespace trainyard::host
