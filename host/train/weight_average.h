#pragma once
// Weight averaging (the `ema:` section): an exponential moving average of the
// network's weights kept beside the trained ones, as timm's ModelEmaV3 and
// MMEngine's EMAHook keep it. Blended in after optimizer updates (a hook),
// saved in every checkpoint (a CheckpointPart: a resumed run continues
// exactly), tested beside the trained weights (the EpochLoop's after_test_pass hook) and
// exported with `trainyard export --weights ema`.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "config/sections.h"
#include "train/checkpoint.h"

namespace trainyard {
class Network;
}

namespace trainyard::host {

class Communicator;
class HostHook;
class Hooks;

class WeightAverage final : public CheckpointPart {
 public:
  /// Averages `network`'s parameters (and its buffers with buffers: average).
  /// It starts as a copy of the network's weights at start().
  WeightAverage(const EmaConfig& config, Network& network);

  /// Starts the average from the network's current weights, unless a
  /// checkpoint or an earlier stage already gave it one.
  void start(Network& network);
  /// Continues the average of an earlier stage of the run (its tensors, its
  /// update count) when it averages the same tensors; otherwise start()s.
  void continue_from(const WeightAverage& earlier, Network& network);
  /// After each optimizer update: counts it and, every every_updates-th one,
  /// blends the network's weights in with the decay for that count.
  /// `skipped`: where the update's checks stay on the device, its flag (a
  /// 0-dim tensor, 1 where the optimizer skipped the update): a skipped
  /// update is blended in with weight 0, so the average takes in no step
  /// that never happened, without reading the device.
  void after_update(Network& network, const at::Tensor& skipped = {});
  /// `count` updates counted by after_update were skipped on the device (the
  /// host learns it when it reads the checks): the count goes back to the
  /// updates that happened, as where the host checks each update.
  void uncount(int64_t count);

  /// The decay timm's warmup gives after `updates` optimizer updates.
  double decay_at(int64_t updates) const;
  int64_t updates() const { return updates_; }
  double last_decay() const { return last_decay_; }
  const EmaConfig& config() const { return config_; }

  /// Puts the averaged weights into the network until the returned object is
  /// destroyed; the trained weights come back bit for bit.
  class Swap {
   public:
    Swap(Swap&&) = default;
    ~Swap();

   private:
    friend class WeightAverage;
    Swap() = default;
    std::vector<std::pair<at::Tensor, at::Tensor>> restore_;  ///< (network tensor, its trained values)
  };
  [[nodiscard]] Swap swapped_into(Network& network) const;
  /// Writes the averaged weights into the network for good (export).
  void copy_into(Network& network) const;

  /// SHA-256 of the averaged tensors' bytes: equal on every rank of a data-parallel run.
  std::string digest() const;

  // CheckpointPart
  std::string checkpoint_key() const override { return "ema"; }
  void save_part(torch::serialize::OutputArchive& archive) const override;
  void load_part(torch::serialize::InputArchive& archive) override;

 private:
  /// The network's tensors this average covers, by name, in its order.
  std::vector<std::pair<std::string, at::Tensor>> covered(Network& network) const;

  EmaConfig config_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> averaged_;
  int64_t updates_ = 0;  ///< optimizer updates seen (timm's step)
  /// Checks kept on the device: the updates that happened, counted there (a
  /// 0-dim double); made from updates_ where that holds no unread skip (at
  /// start, continue_from, load_part).
  at::Tensor device_updates_;
  double last_decay_ = 0;
  bool started_ = false;
};

/// The hook that keeps `average` current: start() before the run, after_update
/// after each optimizer update. In a data-parallel run it first broadcasts
/// rank 0's buffers (so every rank averages the same ones) and, after the run,
/// checks that every rank holds the same average (an error names the ranks).
std::shared_ptr<HostHook> weight_average_hook(std::shared_ptr<WeightAverage> average);
/// The average kept by `hooks`' weight average hook, or null when it has none.
WeightAverage* weight_average_of(const Hooks& hooks);

}  // namespace trainyard::host
