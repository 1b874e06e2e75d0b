#include "train/update.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include "distributed/communicator.h"
#include "distributed/gradient_reducer.h"
#include "train/grad_norm.h"
#include "train/guard.h"
#include "train/nonfinite.h"
#include "util/json.h"
#include "util/text.h"

namespace trainyard::host {

namespace {
// A factor for at::_foreach_mul_ as a 0-dim double tensor on the CPU: each
// gradient is multiplied exactly as by its own mul_(factor) (the Scalar
// overload rounds the factor to bf16 or fp16 first for such gradients on the
// CPU).
at::Tensor host_scalar(double factor) { return at::scalar_tensor(factor, at::TensorOptions().dtype(at::kDouble)); }

// Every gradient times a factor known on the host, one call per device and
// dtype (the multi-tensor kernels' fast path): on the CPU through
// host_scalar (exact, above); elsewhere as a Scalar, which CUDA's kernel
// takes without reading anything back (a CPU scalar tensor is read with
// .item() there first).
void scale_gradients(std::vector<at::Tensor>& grads, double factor) {
  for (auto& [key, group] : by_device_and_dtype(grads)) {
    if (std::get<0>(key) == c10::DeviceType::CPU)
      at::_foreach_mul_(group, host_scalar(factor));
    else
      at::_foreach_mul_(group, factor);
  }
}

std::string iteration_text(const LoopPosition& at) {
  return "iteration " + std::to_string(at.iteration + 1) + " (epoch " + std::to_string(at.epoch + 1) + ", batch " +
         std::to_string(at.position + 1) + ")";
}

std::string norm_text(double norm) { return std::isnan(norm) ? "NaN" : std::isinf(norm) ? "inf" : json_number(norm); }

}  // namespace

double clip_gradients(std::vector<at::Tensor>& grads, double max_value, double max_norm, const at::Tensor& poison) {
  at::NoGradGuard no_grad;
  clamp_gradients(grads, max_value);
  // One read of each gradient: this runs at every update, for the non-finite check too.
  const double norm = std::sqrt(squared_norm(grads, poison));
  if (max_norm > 0 && norm > max_norm) scale_gradients(grads, max_norm / norm);
  return norm;
}

UpdateSettings UpdateSettings::from(const LoopConfig& loop, const ScheduleConfig& schedule,
                                    const std::string& loss_plugin) {
  return {.iter_size = loop.iter_size,
          .precision = loop.effective_precision(),
          .clip_grad_norm = loop.clip_grad_norm,
          .clip_grad_value = loop.clip_grad_value,
          .nonfinite = loop.nonfinite,
          .nonfinite_max_skips = loop.nonfinite_max_skips,
          .epochs = loop.epochs,
          .schedule_per_epoch = schedule.unit == "epoch",
          .loss_plugin = loss_plugin,
          .update_checks_every = loop.update_checks_count().value_or(0),
          .log_every_iters = loop.log_every_iters};
}

Updater::Updater(UpdateSettings settings, Components& c, const Context& context)
    : s_(std::move(settings)), c_(c), context_(context), parameters_(c.network.object->parameters()) {
  scaler_.enabled = autocast_dtype(s_.precision) == at::kHalf;
  for (auto& group : c_.optimizer->param_groups()) base_lrs_.push_back(group.options().get_lr());
  skippable_ = c_.optimizer_plugin.facets.skippable_step;
  // On the CPU a read costs nothing; on a GPU each one empties the device's
  // queue, and the train log line reads the meters then anyway.
  checks_every_ = s_.update_checks_every > 0 ? s_.update_checks_every
                  : context_.device.is_cpu() ? 1
                                             : std::max<int64_t>(1, s_.log_every_iters / s_.iter_size);
}

bool Updater::checks_on_device() const {
  return checks_every_ > 1 && !scaler_.enabled && !debug_ && !fixed_lr_ &&
         (s_.nonfinite == "ignore" || skippable_ != nullptr);
}

double Updater::lr() const { return c_.optimizer->param_groups().at(0).options().get_lr(); }

void Updater::begin_batch() {
  if (micro_ != 0) return;
  if (!gradients_kept_) c_.optimizer->zero_grad();  // kept: a replay overwrites them
  if (reducer_) reducer_->prepare();
}

void Updater::backward(const at::Tensor& loss, const Batch& batch, const at::Tensor& output, const UpdateClock& clock) {
  if (debug_ || s_.nonfinite != "ignore") {
    batch_ = &batch;
    if (checks_on_device()) {
      if (!reducer_) pending_losses_.push_back(loss.detach());  // a halting update's cause (outputs are not kept)
    } else if (!debug_ && !scaler_.enabled) {
      // Read with the update's gradient norm (finish): one read of the
      // device an update, not one a batch.
      pending_losses_.push_back(loss.detach());
      pending_outputs_.push_back(output.detach());
    } else if (!std::isfinite(loss.item<double>())) {
      loss_finite_ = false;
      last_output_ = output.detach();
      UpdateOutcome unused;
      if (debug_ && !fixed_lr_) handle_nonfinite(clock, unused);  // throws here, before backward
    }
  }
  // Accumulating k batches: each contributes 1/k, so the update is that of one k-times larger batch.
  if (reducer_) reducer_->set_active(micro_ == s_.iter_size - 1);  // communicate on the last backward only
  // fp16-mixed: backward of the scaled loss, so small gradients survive in float16.
  const double factor = scaler_.factor() / static_cast<double>(s_.iter_size);
  guarded(*c_.network.config, "backward", [&] { (factor != 1.0 ? loss * factor : loss).backward(); });
  ++micro_;
}

std::vector<at::Tensor> Updater::gradients() {
  std::vector<at::Tensor> grads;
  grads.reserve(parameters_.size());
  for (auto& p : parameters_)
    if (p.grad().defined()) grads.push_back(p.mutable_grad());
  return grads;
}

void Updater::zero_gradients_in_place() {
  std::vector<at::Tensor> grads = gradients();
  if (!grads.empty()) at::_foreach_zero_(grads);
}

void Updater::backward_done(const at::Tensor& loss) {
  if (checks_on_device() && s_.nonfinite != "ignore" && !reducer_) pending_losses_.push_back(loss.detach());
  ++micro_;
}

void Updater::backward_nothing(const std::function<at::Tensor(const Batch&)>& forward) {
  begin_batch();
  reducer_->set_active(micro_ == s_.iter_size - 1);
  if (context_.sync_batch_norm) {
    // Synchronized batch norm layers make collectives in forward and backward:
    // run them on an empty batch (contributing zero samples).
    std::vector<int64_t> shape{0};
    shape.insert(shape.end(), context_.dataset.sample_shape.begin(), context_.dataset.sample_shape.end());
    Batch empty{at::zeros(shape, at::kFloat).to(context_.device), at::zeros({0}, at::kLong).to(context_.device), {}};
    at::Tensor output = forward(empty);  // in the run's precision, as the other ranks' forward
    guarded(*c_.network.config, "backward", [&] { (output.sum() * 0).backward(); });
  }
  ++micro_;
}

void Updater::set_fixed_lr(std::optional<double> lr) {
  fixed_lr_ = lr;
  auto& groups = c_.optimizer->param_groups();
  if (!lr)
    for (size_t i = 0; i < groups.size() && i < base_lrs_.size(); ++i) groups[i].options().set_lr(base_lrs_[i]);
}

void Updater::apply_schedule(const UpdateClock& clock, const ScheduleFactor& schedule) {
  auto& groups = c_.optimizer->param_groups();
  if (fixed_lr_) {
    const double first = base_lr();
    for (size_t i = 0; i < groups.size() && i < base_lrs_.size(); ++i)
      groups[i].options().set_lr(first > 0 ? *fixed_lr_ * base_lrs_[i] / first : *fixed_lr_);
    return;
  }
  const bool per_epoch = s_.schedule_per_epoch;
  const int64_t updates_per_epoch = (clock.batches_per_epoch + s_.iter_size - 1) / s_.iter_size;
  // Counted from the start of this stage (of the run, in a one-stage run).
  const int64_t step = per_epoch ? clock.at.epoch - clock.stage_first_epoch
                                 : (clock.at.iteration - clock.stage_first_iteration) / s_.iter_size;
  const int64_t total = per_epoch ? s_.epochs : s_.epochs * updates_per_epoch;
  const double factor = schedule(step, total);
  for (size_t i = 0; i < groups.size() && i < base_lrs_.size(); ++i) groups[i].options().set_lr(base_lrs_[i] * factor);
}

void Updater::drop_update(std::vector<at::Tensor>& grads) {
  for (auto& g : grads) g.zero_();
  micro_ = 0;
  loss_finite_ = true;
  pending_losses_.clear(), pending_outputs_.clear();
}

at::Tensor Updater::pending_loss_poison() const {
  // loss - loss: 0 for a finite loss, NaN for NaN or inf. Summed into the
  // squared gradient norm, one non-finite loss makes the norm non-finite.
  if (pending_losses_.empty() || reducer_) return {};  // across ranks the averaged gradients decide
  const at::Tensor losses = at::stack(pending_losses_).to(at::kDouble);
  return (losses - losses).sum();
}

void Updater::resolve_pending_losses() {
  if (pending_losses_.empty()) return;
  // Only where the norm is not finite: which loss (if any) was, for the message.
  const at::Tensor finite = at::stack(pending_losses_).isfinite().cpu();
  for (int64_t i = 0; i < finite.numel(); ++i)
    if (!finite[i].item<bool>()) {
      loss_finite_ = false;
      last_output_ = pending_outputs_[static_cast<size_t>(i)];
      break;
    }
}

UpdateOutcome Updater::finish(const UpdateClock& clock, const ScheduleFactor& schedule) {
  UpdateOutcome outcome;
  if (reducer_) reducer_->finish();  // averaged over ranks, mostly while backward ran
  std::vector<at::Tensor> grads = gradients();
  at::NoGradGuard no_grad;
  // A short accumulation (the epoch ended first) still makes a mean over its batches.
  double rescale = micro_ < s_.iter_size ? static_cast<double>(s_.iter_size) / static_cast<double>(micro_) : 1.0;
  rescale /= scaler_.factor();  // fp16-mixed: unscaled before clipping and the optimizer
  if (rescale != 1.0) scale_gradients(grads, rescale);
  if (checks_on_device()) return finish_on_device(grads, clock, schedule);
  if (!unread_.empty()) {  // the run left the device checks (find-lr, --debug): settle them first
    UpdateOutcome earlier = read_checks();
    if (!earlier.stop.empty()) return earlier;
  }
  if (scaler_.enabled) {
    // An overflow in float16 gradients is the loss scaler's business, not the
    // non-finite policy's: halve the scale and skip this update. One norm of
    // the unscaled, unclamped gradients is the overflow check and, without
    // clipping by value, the clipping norm too (no second reduction).
    const bool by_value = s_.clip_grad_value > 0;
    const double norm = clip_gradients(grads, 0, by_value ? 0 : s_.clip_grad_norm);
    const bool step = scaler_.update(std::isfinite(norm));
    outcome.loss_scale = scaler_.scale;
    if (!step) {
      drop_update(grads);
      outcome.scaler_skipped_updates = static_cast<double>(scaler_.skipped);
      return outcome;
    }
    grad_norm_ = by_value ? clip_gradients(grads, s_.clip_grad_value, s_.clip_grad_norm) : norm;
  } else {
    grad_norm_ = clip_gradients(grads, s_.clip_grad_value, s_.clip_grad_norm, pending_loss_poison());
  }
  if (!std::isfinite(grad_norm_)) resolve_pending_losses();
  // The norm is not finite when any gradient is not; across ranks the
  // averaged gradients make every rank see the same, so they decide alike
  // (a rank's own non-finite loss counts only in a single-process run).
  const bool bad = !std::isfinite(grad_norm_) || (!reducer_ && !loss_finite_);
  if (bad && fixed_lr_) {
    // find-lr holds the rate: a diverging rate is its result, not a failure
    // (no checkpoint, no stop); the finder sees the non-finite loss.
    drop_update(grads);
    return outcome;
  }
  if (bad && (debug_ || s_.nonfinite != "ignore")) {
    handle_nonfinite(clock, outcome);
    if (outcome.stop.empty()) drop_update(grads);  // skipped; a stop keeps the state as it is for the checkpoint
    return outcome;
  }
  if (!bad) skipped_in_a_row_ = 0;
  loss_finite_ = true;
  pending_losses_.clear(), pending_outputs_.clear();
  apply_schedule(clock, schedule);
  guarded(*c_.optimizer_plugin.config, "step", [&] { c_.optimizer->step(); });
  micro_ = 0;
  if (debug_) {
    auto broken = nonfinite_parameters(*c_.network.object, false);
    if (!broken.empty())
      throw NonFiniteStop("debug: the update at iteration " + std::to_string(clock.at.iteration + 1) +
                          " made parameters non-finite (finite gradients, global norm " + json_number(grad_norm_) +
                          ", lr " + json_number(lr()) + "): " + join(broken));
  }
  outcome.stepped = true;
  outcome.grad_norm = grad_norm_;
  outcome.lr = lr();
  return outcome;
}

UpdateOutcome Updater::finish_on_device(std::vector<at::Tensor>& grads, const UpdateClock& clock,
                                        const ScheduleFactor& schedule) {
  UpdateOutcome outcome;
  clamp_gradients(grads, s_.clip_grad_value);
  const bool check = s_.nonfinite != "ignore";
  const at::Tensor poison = check ? pending_loss_poison() : at::Tensor();
  const at::Tensor norm = squared_norm_tensor(grads, poison).sqrt();  // stays where it was computed
  if (s_.clip_grad_norm > 0 && !grads.empty()) {
    // As clip_gradients: scaled to max_norm where the norm is above it (a
    // NaN norm compares false and scales nothing).
    const at::Tensor bound = at::full({}, s_.clip_grad_norm, norm.options());
    scale_gradients_by(grads, at::where(norm > bound, bound / norm, 1.0));
  }
  at::Tensor found_inf;
  if (check) {
    // The policy, kept on the device: a non-finite update is skipped by the
    // optimizer's kernel (found_inf); the update that reaches the policy's
    // limit (error: the first; skip: nonfinite_max_skips in a row) halts the
    // run there, and every later update is skipped too until the host reads
    // the checks: the weights stay the last good update's, as when the host
    // checks each update.
    const auto zero = [&] { return at::zeros({}, norm.options().dtype(at::kFloat)); };
    if (!checks_.in_a_row.defined() || checks_.in_a_row.device() != norm.device())
      checks_ = {norm, zero(), zero(), zero(), zero(), zero()};
    const at::Tensor bad = norm.isfinite().logical_not().to(at::kFloat);
    checks_.in_a_row.add_(bad).mul_(bad);
    const double limit = s_.nonfinite == "skip" ? static_cast<double>(s_.nonfinite_max_skips) : 1.0;
    const at::Tensor halting = checks_.in_a_row.ge(limit).to(at::kFloat).mul_(1 - checks_.halted);
    if (poison.defined()) checks_.loss_nonfinite.add_(halting * poison.isnan());
    checks_.halted.add_(halting);
    checks_.before_halt.add_(1 - checks_.halted);
    checks_.skipped.add_(bad);
    found_inf = at::maximum(bad, checks_.halted).to(parameters_.empty() ? norm.device() : parameters_.front().device());
  }
  checks_.norm = norm;
  apply_schedule(clock, schedule);
  guarded(*c_.optimizer_plugin.config, "step", [&] {
    if (found_inf.defined())
      skippable_->step_unless(found_inf);
    else
      c_.optimizer->step();
  });
  micro_ = 0;
  loss_finite_ = true;
  pending_losses_.clear(), pending_outputs_.clear();
  unread_.push_back(clock);
  if (static_cast<int64_t>(unread_.size()) >= checks_every_) outcome = read_checks();
  outcome.stepped = true;  // as far as the host knows: a skipped update changed nothing
  outcome.skipped_on_device = found_inf;
  outcome.grad_norm = grad_norm_;
  outcome.lr = lr();
  return outcome;
}

UpdateOutcome Updater::read_checks() {
  UpdateOutcome outcome;
  if (unread_.empty()) return outcome;
  const std::vector<UpdateClock> updates = std::exchange(unread_, {});
  const bool check = s_.nonfinite != "ignore" && checks_.halted.defined();
  std::vector<at::Tensor> parts{checks_.norm};
  if (check)
    for (const at::Tensor& t :
         {checks_.in_a_row, checks_.halted, checks_.before_halt, checks_.skipped, checks_.loss_nonfinite})
      parts.push_back(t);
  for (at::Tensor& t : parts) t = t.to(at::kDouble).reshape({1});
  const at::Tensor read = at::cat(parts).cpu();  // the one wait for the device
  const double* v = read.const_data_ptr<double>();
  outcome.checks_read = true;
  grad_norm_ = v[0];
  outcome.grad_norm = grad_norm_;
  outcome.lr = lr();
  if (!check) return outcome;
  const auto in_a_row = static_cast<int64_t>(std::llround(v[1]));
  const bool halted = v[2] > 0;
  const auto before_halt = static_cast<int64_t>(std::llround(v[3]));
  const auto skipped = static_cast<int64_t>(std::llround(v[4]));
  const bool loss_nonfinite = v[5] > 0;
  outcome.skipped_in_read = skipped;
  if (skipped > 0) skippable_->steps_skipped();
  skipped_in_a_row_ = in_a_row;
  const auto first = [&](size_t k) { return iteration_text(updates[std::min(k, updates.size() - 1)].at); };
  const std::string read_at = "read at iteration " + std::to_string(updates.back().at.iteration + 1) +
                              " (loop.update_checks_every " + std::to_string(checks_every_) + ")";
  if (!halted) {
    if (skipped > 0) {
      skipped_updates_ += skipped;
      outcome.skipped_updates = static_cast<double>(skipped_updates_);
      context_.log("skipped " + std::to_string(skipped) + " non-finite update" + (skipped == 1 ? "" : "s") +
                   " of the " + std::to_string(updates.size()) + " from " + first(0) + ", " + read_at);
    }
    checks_.skipped.zero_(), checks_.before_halt.zero_();
    return outcome;
  }
  const auto k = static_cast<size_t>(std::max<int64_t>(0, before_halt));
  const bool last = k + 1 >= updates.size();
  std::string cause = loss_nonfinite ? "non-finite loss" : "non-finite gradients";
  if (!loss_nonfinite && last) {  // the gradients at hand are the halting update's
    const auto bad = nonfinite_gradients(*c_.network.object);
    cause += " (global norm " + norm_text(grad_norm_) + ")" + (bad.empty() ? std::string() : " in " + join(bad));
  }
  const size_t after = updates.size() - std::min(updates.size(), k + 1);
  outcome.stop = "stopped at " + first(k) + ": " + cause +
                 (s_.nonfinite == "skip" ? " (" + std::to_string(s_.nonfinite_max_skips) + " updates in a row)" : "") +
                 "; " + read_at +
                 (after > 0 ? ", the " + std::to_string(after) + " updates after it skipped too" : "") +
                 "; the last good weights are checkpointed here (set loop.update_checks_every: 1 or --debug for the "
                 "layer that made it, loop.nonfinite: skip to "
                 "drop such updates, or lower the learning rate and resume, allowing that config change)";
  return outcome;
}

void Updater::handle_nonfinite(const UpdateClock& clock, UpdateOutcome& outcome) {
  Network& net = *c_.network.object;
  std::string cause;
  if (!loss_finite_ && batch_) {
    cause = "non-finite loss; " +
            diagnose_nonfinite_loss(net, *batch_, last_output_, s_.loss_plugin, component_label(*c_.network.config));
  } else {
    auto bad = nonfinite_gradients(net);
    auto params = nonfinite_parameters(net);
    cause = "non-finite gradients (global norm " + norm_text(grad_norm_) + ")" +
            (bad.empty() ? std::string() : " in " + join(bad)) +
            (params.empty() ? std::string() : "; non-finite parameters: " + join(params));
  }
  const std::string step = iteration_text(clock.at);
  if (!debug_ && s_.nonfinite == "skip" && ++skipped_in_a_row_ < s_.nonfinite_max_skips) {
    ++skipped_updates_;
    outcome.skipped_updates = static_cast<double>(skipped_updates_);
    context_.log("skipped the update at " + step + ": " + cause);
    return;
  }
  if (debug_) throw NonFiniteStop("debug: stopped at " + step + ": " + cause);
  // The weights are still those of the last good update: the caller keeps them, at this batch.
  outcome.stop = "stopped at " + step + ": " + cause +
                 (s_.nonfinite == "skip" ? " (" + std::to_string(skipped_in_a_row_) + " updates in a row)" : "") +
                 "; the last good state is checkpointed at this batch (set loop.nonfinite: skip to drop such "
                 "updates, or lower the learning rate and resume, allowing that config change)";
}

}  // namespace trainyard::host
