// loop.nonfinite checked on the host at every update (update_checks.h): the
// losses are read with the update's gradient norm (fp32, bf16-mixed), or each
// as it comes (fp16-mixed, whose scaler reads the gradients anyway; --debug,
// which names the operation before the backward).
#include <cmath>

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include "train/grad_norm.h"
#include "train/guard.h"
#include "train/nonfinite.h"
#include "train/update_checks.h"
#include "util/json.h"
#include "util/text.h"

namespace trainyard::host {
namespace {

class HostChecks final : public UpdateChecks {
 public:
  HostChecks(const UpdateCheckParts& parts, bool debug, bool find_lr)
      : p_(parts), s_(parts.settings), debug_(debug), find_lr_(find_lr) {}

  void loss(const at::Tensor& loss, const Batch& batch, const at::Tensor& output, const UpdateClock& clock) override {
    if (!debug_ && s_.nonfinite == "ignore") return;
    batch_ = &batch;
    if (!debug_ && !p_.scaler.enabled) {
      // Read with the update's gradient norm (judge): one read of the device
      // an update, not one a batch.
      pending_losses_.push_back(loss.detach());
      pending_outputs_.push_back(output.detach());
    } else if (!std::isfinite(loss.item<double>())) {
      loss_finite_ = false;
      last_output_ = output.detach();
      if (debug_ && !find_lr_) throw NonFiniteStop("debug: stopped at " + iteration_text(clock.at) + ": " + cause());
    }
  }

  void captured_loss(const at::Tensor& loss) override {
    if (s_.nonfinite == "ignore") return;
    pending_losses_.push_back(loss.detach());
    pending_outputs_.emplace_back();  // a captured step keeps no output
  }

  UpdateVerdict judge(std::vector<at::Tensor>& grads, const UpdateClock& clock, bool across_ranks) override {
    UpdateVerdict v;
    if (p_.scaler.enabled) {
      // An overflow in float16 gradients is the loss scaler's business, not
      // the non-finite policy's: halve the scale and skip this update. One
      // norm of the unscaled, unclamped gradients is the overflow check and,
      // without clipping by value, the clipping norm too (no second reduction).
      const bool by_value = s_.clip_grad_value > 0;
      const double norm = clip_gradients(grads, 0, by_value ? 0 : s_.clip_grad_norm);
      const bool step = p_.scaler.update(std::isfinite(norm));
      v.outcome.loss_scale = p_.scaler.scale;
      if (!step) {
        v.action = UpdateVerdict::Action::drop;
        v.outcome.scaler_skipped_updates = static_cast<double>(p_.scaler.skipped);
        return v;
      }
      grad_norm_ = by_value ? clip_gradients(grads, s_.clip_grad_value, s_.clip_grad_norm) : norm;
    } else {
      // Across ranks the averaged gradients decide: every rank sees the same.
      grad_norm_ =
          clip_gradients(grads, s_.clip_grad_value, s_.clip_grad_norm, across_ranks ? at::Tensor() : loss_poison());
    }
    if (!std::isfinite(grad_norm_)) resolve_pending_losses();
    // A rank's own non-finite loss counts only in a single-process run.
    const bool bad = !std::isfinite(grad_norm_) || (!across_ranks && !loss_finite_);
    if (!bad) {
      p_.skipped_in_a_row = 0;
    } else if (find_lr_) {
      // find-lr holds the rate: a diverging rate is its result, not a
      // failure (no checkpoint, no stop); the finder sees the non-finite loss.
      v.action = UpdateVerdict::Action::drop;
    } else if (debug_ || s_.nonfinite != "ignore") {
      handle_nonfinite(clock, v.outcome);
      // skipped; a stop keeps the state as it is for the checkpoint
      v.action = v.outcome.stop.empty() ? UpdateVerdict::Action::drop : UpdateVerdict::Action::stop;
    }
    return v;
  }

  void stepped(const UpdateClock& clock, UpdateOutcome&) override {
    if (!debug_) return;
    auto broken = nonfinite_parameters(*p_.components.network.object, false);
    if (!broken.empty()) {
      const double lr = p_.components.optimizer->param_groups().at(0).options().get_lr();
      throw NonFiniteStop("debug: the update at iteration " + std::to_string(clock.at.iteration + 1) +
                          " made parameters non-finite (finite gradients, global norm " + json_number(grad_norm_) +
                          ", lr " + json_number(lr) + "): " + join(broken));
    }
  }

  void forget() override {
    loss_finite_ = true;
    pending_losses_.clear(), pending_outputs_.clear();
  }

 private:
  // loss - loss: 0 for a finite loss, NaN for NaN or inf. Summed into the
  // squared gradient norm, one non-finite loss makes the norm non-finite.
  at::Tensor loss_poison() const {
    if (pending_losses_.empty()) return {};
    const at::Tensor losses = at::stack(pending_losses_).to(at::kDouble);
    return (losses - losses).sum();
  }

  // Only where the norm is not finite: which loss (if any) was, for the message.
  void resolve_pending_losses() {
    if (pending_losses_.empty()) return;
    const at::Tensor finite = at::stack(pending_losses_).isfinite().cpu();
    for (int64_t i = 0; i < finite.numel(); ++i)
      if (!finite[i].item<bool>()) {
        loss_finite_ = false;
        last_output_ = pending_outputs_[static_cast<size_t>(i)];
        break;
      }
  }

  std::string cause() const {
    Network& net = *p_.components.network.object;
    if (!loss_finite_ && batch_ && last_output_.defined())
      return "non-finite loss; " + diagnose_nonfinite_loss(net, *batch_, last_output_, s_.loss_plugin,
                                                           component_label(*p_.components.network.config));
    if (!loss_finite_) return "non-finite loss";
    auto bad = nonfinite_gradients(net);
    auto params = nonfinite_parameters(net);
    return "non-finite gradients (global norm " + norm_text(grad_norm_) + ")" +
           (bad.empty() ? std::string() : " in " + join(bad)) +
           (params.empty() ? std::string() : "; non-finite parameters: " + join(params));
  }

  // A non-finite loss or gradient: the update skipped (outcome.skipped_updates
  // set), or why to stop (outcome.stop); under --debug, throws NonFiniteStop.
  void handle_nonfinite(const UpdateClock& clock, UpdateOutcome& outcome) {
    const std::string why = cause();
    const std::string step = iteration_text(clock.at);
    if (!debug_ && s_.nonfinite == "skip" && ++p_.skipped_in_a_row < s_.nonfinite_max_skips) {
      outcome.skipped_updates = static_cast<double>(++p_.skipped_updates);
      p_.context.log("skipped the update at " + step + ": " + why);
      return;
    }
    if (debug_) throw NonFiniteStop("debug: stopped at " + step + ": " + why);
    // The weights are still those of the last good update: the caller keeps them, at this batch.
    outcome.stop = nonfinite_stop_message({step, why, s_.nonfinite == "skip" ? p_.skipped_in_a_row : 0, std::string()});
  }

  UpdateCheckParts p_;
  const UpdateSettings& s_;
  const bool debug_, find_lr_;
  /// The losses of the coming update's batches and their outputs, read with
  /// the gradient norm (fp32 and bf16 runs, not --debug).
  std::vector<at::Tensor> pending_losses_, pending_outputs_;
  bool loss_finite_ = true;       ///< every loss of the coming update was finite
  const Batch* batch_ = nullptr;  ///< the batch of a non-finite loss (for diagnoses)
  at::Tensor last_output_;        ///< its output
};

}  // namespace

std::unique_ptr<UpdateChecks> host_checks(const UpdateCheckParts& parts, bool debug, bool find_lr) {
  return std::make_unique<HostChecks>(parts, debug, find_lr);
}

}  // namespace trainyard::host
