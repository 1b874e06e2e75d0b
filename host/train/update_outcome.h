#pragma once
// What an optimizer update reports and what it takes: the types the Updater
// (update.h) and its non-finite policies (update_checks.h) share.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

#include "config/sections.h"
#include "train/checkpoint.h"

namespace trainyard::host {

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

}  // namespace trainyard::host
