#include "train/update.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include "config/step_rules.h"
#include "distributed/gradient_reducer.h"
#include "train/grad_norm.h"
#include "train/guard.h"
#include "train/nonfinite.h"
#include "train/update_checks.h"

namespace trainyard::host {

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
  choose_checks();
}

Updater::~Updater() = default;

void Updater::choose_checks() {
  if (checks_) {
    // Switched (--debug as the run is built, find-lr around its search):
    // the checks kept so far are settled by the policy that kept them.
    const UpdateOutcome earlier = checks_->read();
    if (!earlier.stop.empty()) throw NonFiniteStop(earlier.stop);
  }
  checks_on_host_because_ =
      host::why_checks_read_every_update(CheckPlacementFacts{.checks_every = checks_every_,
                                                             .loss_scaler = scaler_.enabled,
                                                             .debug = debug_,
                                                             .find_lr = fixed_lr_.has_value(),
                                                             .nonfinite = s_.nonfinite,
                                                             .optimizer_skips = skippable_ != nullptr});
  const UpdateCheckParts parts{s_, c_, context_, scaler_, skipped_in_a_row_, skipped_updates_};
  checks_ = checks_on_host_because_.empty() ? device_checks(parts, skippable_, checks_every_)
                                            : host_checks(parts, debug_, fixed_lr_.has_value());
}

void Updater::set_debug(bool on) {
  if (on == debug_) return;
  debug_ = on;
  choose_checks();
}

double Updater::lr() const { return c_.optimizer->param_groups().at(0).options().get_lr(); }
double Updater::grad_norm() const { return checks_->grad_norm(); }

void Updater::begin_batch() {
  if (micro_ != 0) return;
  if (!gradients_kept_) c_.optimizer->zero_grad();  // kept: a replay overwrites them
  if (reducer_) reducer_->prepare();
}

void Updater::backward(const at::Tensor& loss, const Batch& batch, const at::Tensor& output, const UpdateClock& clock) {
  checks_->loss(loss, batch, output, clock);
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
  checks_->captured_loss(loss);
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
  const bool switched = fixed_lr_.has_value() != lr.has_value();
  fixed_lr_ = lr;
  if (switched) choose_checks();
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
  checks_->forget();
}

UpdateOutcome Updater::finish(const UpdateClock& clock, const ScheduleFactor& schedule) {
  if (reducer_) reducer_->finish();  // averaged over ranks, mostly while backward ran
  std::vector<at::Tensor> grads = gradients();
  at::NoGradGuard no_grad;
  // A short accumulation (the epoch ended first) still makes a mean over its batches.
  double rescale = micro_ < s_.iter_size ? static_cast<double>(s_.iter_size) / static_cast<double>(micro_) : 1.0;
  rescale /= scaler_.factor();  // fp16-mixed: unscaled before clipping and the optimizer
  if (rescale != 1.0) scale_gradients(grads, rescale);
  UpdateVerdict verdict = checks_->judge(grads, clock, reducer_ != nullptr);
  UpdateOutcome& outcome = verdict.outcome;
  if (verdict.action == UpdateVerdict::Action::drop) drop_update(grads);
  if (verdict.action != UpdateVerdict::Action::step) return outcome;  // a stop keeps the state for its checkpoint
  checks_->forget();
  apply_schedule(clock, schedule);
  guarded(*c_.optimizer_plugin.config, "step", [&] {
    if (verdict.skip_on_device.defined())
      skippable_->step_unless(verdict.skip_on_device);
    else
      c_.optimizer->step();
  });
  micro_ = 0;
  checks_->stepped(clock, outcome);
  outcome.stepped = true;  // as far as the host knows: an update skipped on the device changed nothing
  outcome.grad_norm = grad_norm();
  outcome.lr = lr();
  return outcome;
}

UpdateOutcome Updater::read_checks() {
  UpdateOutcome outcome = checks_->read();
  if (outcome.checks_read) outcome.lr = lr();
  return outcome;
}

}  // namespace trainyard::host
