#include "train/builtin_hooks.h"

#include "distributed/communicator.h"
#include "train/meter_results.h"
#include "train/trainer.h"

namespace trainyard::host {
namespace {

class TestMeterResults final : public HostHook {
 public:
  std::string name() const override { return "test meter results"; }
  void after_test(Trainer& t, const MeterValues&) override {
    const LoopPosition at = t.position_state();
    Communicator* comm = t.communicator();
    write_meter_results(t.components().test_meters, t.paths().run_dir, at.epoch, at.position, at.iteration, comm,
                        t.writes_files());
  }
};

// The best epoch stays, whatever the rotation of checkpoints deletes. Kept
// once the epoch's checkpoint is written, which is after the epoch's
// after_epoch callbacks (Trainer::default_epoch).
class KeepBestCheckpoint final : public HostHook {
 public:
  std::string name() const override { return "keep best checkpoint"; }
  void after_checkpoint(Trainer& t, const std::string&) override {
    if (!t.epoch_end_checkpoint() || !t.epoch_improved() || !t.experiment().stopping.keep_best) return;
    const LoopPosition at = t.position_state();
    auto keep = [&] {
      if (t.writes_files()) t.checkpoints().keep_as_best(at);
    };
    if (Communicator* comm = t.communicator())
      comm->rank0_work("copy of the best checkpoint", rank0_io_limit(t.experiment().loop.stall_timeout_secs), keep);
    else
      keep();
  }
};

class PeriodicTrainLog final : public HostHook {
 public:
  std::string name() const override { return "periodic train log"; }
  void after_train_iter(Trainer& t, const StepResult&) override {
    if (t.iteration() % t.experiment().loop.log_every_iters != 0) return;
    MeterValues v = t.train_meter_values();
    t.take_values(v);
    t.add_update_values(v);
    t.log("train", v);
  }
};

class PeriodicTest final : public HostHook {
 public:
  std::string name() const override { return "periodic test"; }
  void after_train_iter(Trainer& t, const StepResult&) override {
    const int64_t every = t.experiment().loop.test_every_iters;
    if (every <= 0 || t.iteration() % every != 0) return;
    t.take_values(t.stages().test());
    t.mark_tested();
  }
};

class PeriodicCheckpoint final : public HostHook {
 public:
  std::string name() const override { return "periodic checkpoint"; }
  void after_train_iter(Trainer& t, const StepResult&) override {
    const int64_t every = t.experiment().loop.checkpoint_every_iters;
    if (every > 0 && t.iteration() % every == 0) t.stages().checkpoint();
  }
};

}  // namespace

void add_builtin_hooks(Trainer& trainer) {
  Hooks& hooks = trainer.hooks();
  hooks.add(std::make_shared<TestMeterResults>(), priority::high);
  hooks.add(std::make_shared<KeepBestCheckpoint>(), priority::high);
  hooks.add(std::make_shared<PeriodicTrainLog>(), priority::below_normal);
  hooks.add(std::make_shared<PeriodicTest>(), priority::low);
  hooks.add(std::make_shared<PeriodicCheckpoint>(), priority::very_low);
}

}  // namespace trainyard::host
