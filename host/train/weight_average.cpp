#include "train/weight_average.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <ATen/ops/_foreach_lerp.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "distributed/communicator.h"
#include "log/log.h"
#include "train/hooks.h"
#include "train/meter_results.h"
#include "trainyard/error.h"
#include "trainyard/network.h"
#include "util/sha256.h"
#include "util/shape.h"

namespace trainyard::host {

WeightAverage::WeightAverage(const EmaConfig& config, Network& network) : config_(config) {
  for (const auto& [name, tensor] : covered(network)) names_.push_back(name);
}

std::vector<std::pair<std::string, at::Tensor>> WeightAverage::covered(Network& network) const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : network.named_parameters()) out.emplace_back(p.key(), p.value());
  if (config_.buffers == "average")
    for (const auto& b : network.named_buffers()) out.emplace_back(b.key(), b.value());
  return out;
}

void WeightAverage::start(Network& network) {
  if (started_) return;
  at::NoGradGuard no_grad;
  averaged_.clear();
  for (const auto& [name, tensor] : covered(network)) {
    at::Tensor copy = tensor.detach().clone();
    averaged_.push_back(config_.device == "cpu" ? copy.cpu() : copy);
  }
  updates_ = 0;
  device_updates_ = at::Tensor();
  started_ = true;
}

void WeightAverage::continue_from(const WeightAverage& earlier, Network& network) {
  if (!earlier.started_ || earlier.names_ != names_ || earlier.config_.device != config_.device) {
    start(network);
    return;
  }
  const auto tensors = covered(network);
  for (size_t i = 0; i < names_.size(); ++i)
    if (!earlier.averaged_[i].sizes().equals(tensors[i].second.sizes())) {
      start(network);
      return;
    }
  averaged_.clear();
  for (const auto& t : earlier.averaged_) averaged_.push_back(t.clone());
  updates_ = earlier.updates_;
  device_updates_ = at::Tensor();
  started_ = true;
}

double WeightAverage::decay_at(int64_t updates) const {
  if (!config_.warmup) return config_.decay;
  // timm's ModelEmaV3.get_decay: forgets the first, random weights fast.
  const double warm = 1.0 - std::pow(1.0 + static_cast<double>(updates) / config_.warmup_gamma, -config_.warmup_power);
  return std::clamp(warm, 0.0, config_.decay);
}

void WeightAverage::after_update(Network& network, const at::Tensor& skipped) {
  start(network);
  ++updates_;
  // Checks kept on the device: the count of updates that happened, kept
  // there too (the host's counts the skipped ones until uncount()), gives
  // the warmup's decay; a skipped update's weight is 0.
  at::Tensor weight;
  if (skipped.defined()) {
    const at::Tensor happened = 1 - skipped.to(at::kDouble);
    if (!device_updates_.defined() || device_updates_.device() != skipped.device())
      device_updates_ = at::full({}, static_cast<double>(updates_ - 1), happened.options());
    device_updates_.add_(happened);
    if (updates_ % config_.every_updates != 0) return;
    const at::Tensor decay =
        config_.warmup
            ? (1 - (1 + device_updates_ / config_.warmup_gamma).pow(-config_.warmup_power)).clamp(0, config_.decay)
            : at::full({}, config_.decay, happened.options());
    weight = (1 - decay) * happened;
  } else if (updates_ % config_.every_updates != 0) {
    return;
  }
  const double decay = decay_at(updates_);
  last_decay_ = decay;
  at::NoGradGuard no_grad;
  const auto tensors = covered(network);
  std::vector<at::Tensor> floats_avg, floats_now;
  for (size_t i = 0; i < tensors.size(); ++i) {
    at::Tensor now = tensors[i].second.detach();
    if (now.device() != averaged_[i].device()) now = now.to(averaged_[i].device());
    if (at::isFloatingType(now.scalar_type())) {
      floats_avg.push_back(averaged_[i]);
      floats_now.push_back(now);
    } else {
      averaged_[i].copy_(now);  // counters such as num_batches_tracked are not averaged
    }
  }
  if (floats_avg.empty()) return;
  if (!weight.defined()) {
    // average += (1 - decay) * (now - average), one fused kernel per dtype and device group.
    at::_foreach_lerp_(floats_avg, floats_now, 1.0 - decay);
    return;
  }
  // The same with the weight on the device: ATen's lerp takes a host scalar
  // or a whole tensor per weight, so per (device, dtype) group the difference
  // is scaled by a 0-dim tensor of the group's dtype (the multi-tensor
  // kernels' fast path) and added.
  std::map<std::pair<std::string, at::ScalarType>, std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>>> groups;
  for (size_t i = 0; i < floats_avg.size(); ++i) {
    auto& [avg, now] = groups[{floats_avg[i].device().str(), floats_avg[i].scalar_type()}];
    avg.push_back(floats_avg[i]);
    now.push_back(floats_now[i]);
  }
  for (auto& [key, group] : groups) {
    auto& [avg, now] = group;
    std::vector<at::Tensor> step = at::_foreach_sub(now, avg);
    at::_foreach_mul_(step, weight.to(avg.front().device(), key.second));
    at::_foreach_add_(avg, step);
  }
}

void WeightAverage::uncount(int64_t count) { updates_ -= count; }

WeightAverage::Swap::~Swap() {
  at::NoGradGuard no_grad;
  for (auto& [tensor, trained] : restore_) tensor.copy_(trained);
}

WeightAverage::Swap WeightAverage::swapped_into(Network& network) const {
  Swap swap;
  at::NoGradGuard no_grad;
  const auto tensors = covered(network);
  for (size_t i = 0; i < tensors.size(); ++i) {
    at::Tensor tensor = tensors[i].second.detach();
    swap.restore_.emplace_back(tensor, tensor.clone());
    tensor.copy_(averaged_[i]);
  }
  return swap;
}

void WeightAverage::copy_into(Network& network) const {
  at::NoGradGuard no_grad;
  const auto tensors = covered(network);
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].second.detach().copy_(averaged_[i]);
}

std::string WeightAverage::digest() const {
  std::string bytes;
  for (const auto& t : averaged_) {
    const at::Tensor c = t.cpu().contiguous();
    bytes.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
  }
  return sha256_hex(bytes);
}

namespace {
// "t0", "t1", ...: the averaged tensors' keys in the archive (the names go in a list beside them).
std::string tensor_key(size_t i) { return std::string("t").append(std::to_string(i)); }
}  // namespace

void WeightAverage::save_part(torch::serialize::OutputArchive& archive) const {
  archive.write("names", c10::IValue(c10::List<std::string>(names_)));
  archive.write("updates", c10::IValue(updates_));
  archive.write("buffers", c10::IValue(config_.buffers));
  for (size_t i = 0; i < averaged_.size(); ++i) archive.write(tensor_key(i), averaged_[i]);
}

void WeightAverage::load_part(torch::serialize::InputArchive& archive) {
  c10::IValue names, updates;
  archive.read("names", names);
  archive.read("updates", updates);
  std::vector<std::string> saved;
  for (const auto& n : names.toListRef()) saved.push_back(n.toStringRef());
  if (saved != names_)
    throw Error("its averaged weights (ema) cover " + std::to_string(saved.size()) + " tensors, this run's average " +
                std::to_string(names_.size()) + " (ema.buffers or the network changed)");
  std::vector<at::Tensor> loaded;
  for (size_t i = 0; i < saved.size(); ++i) {
    at::Tensor t;
    archive.read(tensor_key(i), t);
    loaded.push_back(config_.device == "cpu" ? t.cpu() : t);
  }
  // The shapes are the network's (the network's own tensors were checked the same way).
  if (!averaged_.empty())
    for (size_t i = 0; i < loaded.size(); ++i)
      if (!loaded[i].sizes().equals(averaged_[i].sizes()))
        throw Error("its averaged weight " + saved[i] + " is " + shape_text(loaded[i].sizes()) + ", the network's " +
                    shape_text(averaged_[i].sizes()));
  averaged_ = std::move(loaded);
  updates_ = updates.toInt();
  device_updates_ = at::Tensor();
  started_ = true;
}

namespace {

class WeightAverageHook final : public HostHook {
 public:
  explicit WeightAverageHook(std::shared_ptr<WeightAverage> average) : average_(std::move(average)) {}
  std::string name() const override { return "weight average (ema)"; }
  WeightAverage* average() const { return average_.get(); }
  CheckpointPart* checkpoint_part() override { return average_.get(); }
  void after_resume(LoopState&, const CheckpointState& state, const std::string& path) override {
    if (state.parts_found.empty())
      log_warning("warning: " + path +
                  ": the checkpoint has no averaged weights (ema); the average starts from its weights");
  }
  void continue_stage(LoopState&, LoopState& previous) override {
    if (const auto* earlier = previous.hooks().find<WeightAverageHook>())
      average_->continue_from(*earlier->average_, previous.network());
  }
  void before_run(LoopState& t) override { average_->start(t.network()); }
  // ema.evaluate: the same pass on the averaged weights, its values tagged
  // test_ema_*. The meters then hold the trained weights' pass again: their
  // result files (after_test) are the trained weights'.
  void after_test_pass(LoopState& t, MeterValues& v) override {
    if (!average_->config().evaluate) return;
    const auto& meters = t.components().test_meters;
    std::vector<MeterState> trained;
    for (const auto& m : meters) trained.push_back(meter_state(m));
    MeterValues averaged;
    {
      const WeightAverage::Swap swap = average_->swapped_into(t.network());
      averaged = t.test_pass();
    }
    for (size_t i = 0; i < meters.size(); ++i) set_meter_state(meters[i], trained[i]);
    for (const auto& [name, value] : averaged) v["test_ema_" + name.substr(std::string("test_").size())] = value;
  }
  void after_update(LoopState& t, const UpdateOutcome& outcome) override {
    // The buffers the average takes in are rank 0's, on every rank.
    if (Communicator* comm = t.communicator(); comm && average_->config().buffers == "average" &&
                                               (average_->updates() + 1) % average_->config().every_updates == 0)
      comm->broadcast_buffers(t.network());
    average_->after_update(t.network(), outcome.skipped_on_device);
  }
  // Updates counted by after_update that the device skipped: counted no more.
  void after_update_checks(LoopState&, const UpdateOutcome& outcome) override {
    if (outcome.skipped_in_read > 0) average_->uncount(outcome.skipped_in_read);
  }
  void after_run(LoopState& t) override {
    Communicator* comm = t.communicator();
    if (!comm) return;
    const std::string digest = average_->digest();
    const std::vector<std::string> digests = comm->exchange(digest);
    std::vector<size_t> differ;
    for (size_t r = 1; r < digests.size(); ++r)
      if (digests[r] != digests[0]) differ.push_back(r);
    if (!differ.empty()) {
      std::string list;
      for (size_t r : differ) list += (list.empty() ? "" : ", ") + std::to_string(r);
      throw Error("ema: the averaged weights of rank(s) " + list +
                  " differ from rank 0's; expected the same average on every rank (a nondeterministic update, or a "
                  "callback that changes weights on one rank)");
    }
    if (t.writes_files())
      InfoLine() << "trainyard: ema: the averaged weights are the same on all " << digests.size() << " ranks (SHA-256 "
                 << digest.substr(0, 16) << ", " << average_->updates() << " updates)\n";
  }

 private:
  std::shared_ptr<WeightAverage> average_;
};

}  // namespace

std::shared_ptr<HostHook> weight_average_hook(std::shared_ptr<WeightAverage> average) {
  return std::make_shared<WeightAverageHook>(std::move(average));
}

WeightAverage* weight_average_of(const Hooks& hooks) {
  const auto* hook = hooks.find<WeightAverageHook>();
  return hook ? hook->average() : nullptr;
}

}  // namespace trainyard::host
