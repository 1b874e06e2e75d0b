// loop.nonfinite kept on the device (update_checks.h): a GPU step never waits
// for the GPU. A non-finite update is skipped by the optimizer's own kernel
// (found_inf, as PyTorch's GradScaler does); the update that reaches the
// policy's limit (error: the first; skip: nonfinite_max_skips in a row) halts
// the run there, and every later update is skipped too until the host reads
// the checks: the weights stay the last good update's, as when the host
// checks each update.
#include <algorithm>
#include <cmath>
#include <utility>

#include <ATen/ATen.h>

#include "train/grad_norm.h"
#include "train/nonfinite.h"
#include "train/update_checks.h"
#include "util/text.h"

namespace trainyard::host {
namespace {

class DeviceChecks final : public UpdateChecks {
 public:
  DeviceChecks(const UpdateCheckParts& parts, trainyard::SkippableStep* optimizer, int64_t every)
      : p_(parts), s_(parts.settings), optimizer_(optimizer), every_(every), check_(s_.nonfinite != "ignore") {}

  bool on_device() const override { return true; }

  // A halting update's cause (outputs are not kept: the diagnosis needs the host).
  void loss(const at::Tensor& loss, const Batch&, const at::Tensor&, const UpdateClock&) override {
    captured_loss(loss);
  }
  void captured_loss(const at::Tensor& loss) override {
    if (check_) pending_losses_.push_back(loss.detach());
  }

  UpdateVerdict judge(std::vector<at::Tensor>& grads, const UpdateClock&, bool across_ranks) override {
    UpdateVerdict v;
    clamp_gradients(grads, s_.clip_grad_value);
    // loss - loss: NaN for a non-finite loss; across ranks the averaged gradients decide.
    at::Tensor poison;
    if (check_ && !across_ranks && !pending_losses_.empty()) {
      const at::Tensor losses = at::stack(pending_losses_).to(at::kDouble);
      poison = (losses - losses).sum();
    }
    const at::Tensor norm = squared_norm_tensor(grads, poison).sqrt();  // stays where it was computed
    if (s_.clip_grad_norm > 0 && !grads.empty()) {
      // As clip_gradients: scaled to max_norm where the norm is above it (a
      // NaN norm compares false and scales nothing).
      const at::Tensor bound = at::full({}, s_.clip_grad_norm, norm.options());
      scale_gradients_by(grads, at::where(norm > bound, bound / norm, 1.0));
    }
    c_.norm = norm;
    if (!check_) return v;
    const auto zero = [&] { return at::zeros({}, norm.options().dtype(at::kFloat)); };
    if (!c_.in_a_row.defined() || c_.in_a_row.device() != norm.device())
      c_ = {norm, zero(), zero(), zero(), zero(), zero()};
    const at::Tensor bad = norm.isfinite().logical_not().to(at::kFloat);
    c_.in_a_row.add_(bad).mul_(bad);
    const double limit = s_.nonfinite == "skip" ? static_cast<double>(s_.nonfinite_max_skips) : 1.0;
    const at::Tensor halting = c_.in_a_row.ge(limit).to(at::kFloat).mul_(1 - c_.halted);
    if (poison.defined()) c_.loss_nonfinite.add_(halting * poison.isnan());
    c_.halted.add_(halting);
    c_.before_halt.add_(1 - c_.halted);
    c_.skipped.add_(bad);
    const c10::Device device = grads.empty() ? norm.device() : grads.front().device();
    v.skip_on_device = at::maximum(bad, c_.halted).to(device);
    v.outcome.skipped_on_device = v.skip_on_device;
    return v;
  }

  void stepped(const UpdateClock& clock, UpdateOutcome& outcome) override {
    unread_.push_back(clock);
    if (static_cast<int64_t>(unread_.size()) < every_) return;
    UpdateOutcome read_now = read();
    read_now.skipped_on_device = outcome.skipped_on_device;
    outcome = std::move(read_now);
  }

  UpdateOutcome read() override;

  void forget() override { pending_losses_.clear(); }

 private:
  UpdateCheckParts p_;
  const UpdateSettings& s_;
  trainyard::SkippableStep* optimizer_;  ///< null under loop.nonfinite ignore (nothing to skip)
  const int64_t every_;
  const bool check_;  ///< loop.nonfinite is not ignore
  std::vector<at::Tensor> pending_losses_;
  /// The checks kept on the device: 0-dim tensors on the gradients' device.
  struct Checks {
    at::Tensor norm;            ///< double: the last update's gradient norm
    at::Tensor in_a_row;        ///< float: non-finite updates in a row (across reads)
    at::Tensor halted;          ///< float: 1 once the policy stops (error: the first; skip: max_skips in a row)
    at::Tensor before_halt;     ///< float: updates since the last read before the halting one
    at::Tensor skipped;         ///< float: non-finite updates skipped since the last read
    at::Tensor loss_nonfinite;  ///< float: the halting update's losses were not all finite (single process)
  };
  Checks c_;
  std::vector<UpdateClock> unread_;  ///< the clocks of the updates since the last read, in order
};

UpdateOutcome DeviceChecks::read() {
  UpdateOutcome outcome;
  if (unread_.empty()) return outcome;
  const std::vector<UpdateClock> updates = std::exchange(unread_, {});
  const bool check = check_ && c_.halted.defined();
  std::vector<at::Tensor> parts{c_.norm};
  if (check)
    for (const at::Tensor& t : {c_.in_a_row, c_.halted, c_.before_halt, c_.skipped, c_.loss_nonfinite})
      parts.push_back(t);
  for (at::Tensor& t : parts) t = t.to(at::kDouble).reshape({1});
  const at::Tensor values = at::cat(parts).cpu();  // the one wait for the device
  const double* v = values.const_data_ptr<double>();
  outcome.checks_read = true;
  grad_norm_ = v[0];
  outcome.grad_norm = grad_norm_;
  if (!check) return outcome;
  const auto in_a_row = static_cast<int64_t>(std::llround(v[1]));
  const bool halted = v[2] > 0;
  const auto before_halt = static_cast<int64_t>(std::llround(v[3]));
  const auto skipped = static_cast<int64_t>(std::llround(v[4]));
  const bool loss_nonfinite = v[5] > 0;
  outcome.skipped_in_read = skipped;
  if (skipped > 0 && optimizer_) optimizer_->steps_skipped();
  p_.skipped_in_a_row = in_a_row;
  const auto first = [&](size_t k) { return iteration_text(updates[std::min(k, updates.size() - 1)].at); };
  const std::string read_at = "read at iteration " + std::to_string(updates.back().at.iteration + 1) +
                              " (loop.update_checks_every " + std::to_string(every_) + ")";
  if (!halted) {
    if (skipped > 0) {
      p_.skipped_updates += skipped;
      outcome.skipped_updates = static_cast<double>(p_.skipped_updates);
      p_.context.log("skipped " + std::to_string(skipped) + " non-finite update" + (skipped == 1 ? "" : "s") +
                     " of the " + std::to_string(updates.size()) + " from " + first(0) + ", " + read_at);
    }
    c_.skipped.zero_(), c_.before_halt.zero_();
    return outcome;
  }
  const auto k = static_cast<size_t>(std::max<int64_t>(0, before_halt));
  std::string cause = loss_nonfinite ? "non-finite loss" : "non-finite gradients";
  if (!loss_nonfinite && k + 1 >= updates.size()) {  // the gradients at hand are the halting update's
    const auto bad = nonfinite_gradients(*p_.components.network.object);
    cause += " (global norm " + norm_text(grad_norm_) + ")" + (bad.empty() ? std::string() : " in " + join(bad));
  }
  const size_t after = updates.size() - std::min(updates.size(), k + 1);
  outcome.stop = nonfinite_stop_message(
      {first(k), cause, s_.nonfinite == "skip" ? s_.nonfinite_max_skips : 0,
       read_at + (after > 0 ? ", the " + std::to_string(after) + " updates after it skipped too" : "")});
  return outcome;
}

}  // namespace

std::unique_ptr<UpdateChecks> device_checks(const UpdateCheckParts& parts, trainyard::SkippableStep* optimizer,
                                            int64_t every) {
  return std::make_unique<DeviceChecks>(parts, optimizer, every);
}

}  // namespace trainyard::host
