// Host hooks: the loop's listeners in one priority order, the host's own
// duties among them, and room for new ones (weight averaging) without a
// change to the loop.
#include <gtest/gtest.h>

#include <filesystem>

#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "support/support.h"
#include "train/checkpoint_store.h"
#include "train/epoch_loop.h"
#include "train/hooks.h"
#include "util/text.h"

namespace trainyard::host {
namespace {

// Records, at every iteration that logs and tests, whether the periodic
// train log (below_normal) has run before it and the periodic test (low) not yet.
class Probe final : public HostHook {
 public:
  std::string name() const override { return "probe"; }
  void after_train_iter(LoopState& t, const StepResult&) override {
    if (t.iteration() % 2 != 0) return;
    const auto& r = t.meter_readings();
    ++seen;
    if (r.count("train_loss") && r.at("train_loss").iteration == t.iteration()) ++after_log;
    if (!r.count("test_loss") || r.at("test_loss").iteration < t.iteration()) ++before_test;
  }
  int seen = 0, after_log = 0, before_test = 0;
};

TEST(HostHooks, AHookAtPriorityFifteenRunsAfterThePeriodicTrainLogAndBeforeThePeriodicTest) {
  Context context;
  auto trainer =
      test::assembled("hook-order", {"loop.epochs=1", "loop.log_every_iters=2", "loop.test_every_iters=2"}, context);
  auto probe = std::make_shared<Probe>();
  trainer->hooks().add(probe, 15);
  const std::vector<std::string> order = trainer->hooks().listing();
  auto at = [&](const std::string& entry) { return std::find(order.begin(), order.end(), entry) - order.begin(); };
  ASSERT_LT(at("below_normal: periodic train log"), static_cast<long>(order.size())) << join(order);
  EXPECT_EQ(at("15: probe"), at("below_normal: periodic train log") + 1) << join(order);
  EXPECT_EQ(at("low: periodic test"), at("15: probe") + 1) << join(order);
  EXPECT_LT(at("high: test meter results"), at("below_normal: periodic train log")) << join(order);

  trainer->run();
  // 512 samples in batches of 32: 16 iterations, 8 of them even.
  EXPECT_EQ(probe->seen, 8);
  EXPECT_EQ(probe->after_log, 8);    // the log hook had taken this iteration's train values
  EXPECT_EQ(probe->before_test, 8);  // the test hook had not yet tested this iteration
  EXPECT_EQ(trainer->meter_readings().at("test_loss").iteration, 16);  // ... and then it did
}

// A toy weight average (the real one is train/weight_average): an exponential moving average
// of the parameters after every optimizer update, with nothing in the loop
// changed for it.
class ToyAverage final : public HostHook {
 public:
  explicit ToyAverage(double decay) : decay_(decay) {}
  std::string name() const override { return "weight average"; }
  void after_update(LoopState& t, const UpdateOutcome& outcome) override {
    ASSERT_TRUE(outcome.stepped);
    ++updates;
    at::NoGradGuard no_grad;
    const auto params = t.network().parameters();
    if (average.empty()) {
      for (const auto& p : params) average.push_back(p.detach().clone());
      return;
    }
    for (size_t i = 0; i < params.size(); ++i) average[i].mul_(decay_).add_(params[i].detach(), 1 - decay_);
  }
  int updates = 0;
  std::vector<at::Tensor> average;

 private:
  double decay_;
};

TEST(HostHooks, WeightAveragingLandsAsAnAfterUpdateHookOncePerOptimizerStep) {
  Context context;
  // iter_size 3: 16 batches an epoch make 6 updates (the last one of 1 batch), 12 in two epochs.
  auto trainer = test::assembled("hook-ema", {"loop.epochs=2", "loop.iter_size=3"}, context);
  auto last = std::make_shared<ToyAverage>(0.0);  // decay 0: the average is the last weights
  auto smooth = std::make_shared<ToyAverage>(0.9);
  trainer->hooks().add(last, priority::lowest);
  trainer->hooks().add(smooth, priority::lowest);
  trainer->run();
  EXPECT_EQ(last->updates, 12);
  EXPECT_EQ(smooth->updates, 12);
  const auto params = trainer->network().parameters();
  ASSERT_EQ(last->average.size(), params.size());
  bool differs = false;
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(last->average[i].equal(params[i].detach()));
    EXPECT_TRUE(smooth->average[i].isfinite().all().item<bool>());
    differs = differs || !smooth->average[i].equal(params[i].detach());
  }
  EXPECT_TRUE(differs);  // the average lags the trained weights
}

// A hook with state of its own (the optimizer updates it has seen), kept as a
// checkpoint part: the way a new duty survives a resume without the loop
// knowing it.
class UpdateCounter final : public HostHook, public CheckpointPart {
 public:
  std::string name() const override { return "update counter"; }
  void after_update(LoopState&, const UpdateOutcome&) override { ++updates; }
  CheckpointPart* checkpoint_part() override { return this; }
  void after_resume(LoopState&, const CheckpointState& state, const std::string&) override {
    found = std::find(state.parts_found.begin(), state.parts_found.end(), "update_counter") != state.parts_found.end();
  }
  std::string checkpoint_key() const override { return "update_counter"; }
  void save_part(torch::serialize::OutputArchive& archive) const override {
    archive.write("updates", c10::IValue(updates));
  }
  void load_part(torch::serialize::InputArchive& archive) override {
    c10::IValue saved;
    archive.read("updates", saved);
    updates = saved.toInt();
  }
  int64_t updates = 0;
  bool found = false;
};

TEST(HostHooks, AHookKeepsItsStateInEveryCheckpointAndHasItBackOnResume) {
  Context first_context;
  auto first = test::assembled("hook-part", {"loop.epochs=1"}, first_context);
  auto counter = std::make_shared<UpdateCounter>();
  first->hooks().add(counter, priority::normal);
  first->run();
  ASSERT_EQ(counter->updates, 16);  // 512 samples in batches of 32
  const std::vector<std::string> checkpoints = first->checkpoints().list();
  ASSERT_FALSE(checkpoints.empty());
  const std::string kept = test::temp_dir("kept") + "/last.pt";
  std::filesystem::copy_file(checkpoints.back(), kept);

  // The same experiment with a second epoch, resumed from the first one's last checkpoint.
  Context context;
  auto resumed = test::assembled("hook-part-resumed", {"loop.epochs=2"}, context);
  auto restored = std::make_shared<UpdateCounter>();
  resumed->hooks().add(restored, priority::normal);
  resumed->resume(kept, Verify::already_done);
  EXPECT_TRUE(restored->found);
  EXPECT_EQ(restored->updates, 16);
  resumed->run();
  EXPECT_EQ(restored->updates, 32);
}

// A hook asks for a checkpoint before a batch is fetched; the loop writes it
// before training on that batch, and the epoch line carries what a hook adds.
class CheckpointAtFive final : public HostHook {
 public:
  std::string name() const override { return "checkpoint at five"; }
  void before_fetch(LoopState& t) override {
    if (t.iteration() == 5) t.request_checkpoint();
  }
  void after_checkpoint(LoopState& t, const std::string& path) override { written.emplace_back(t.iteration(), path); }
  void epoch_trained(LoopState&, MeterValues& line) override { line["checkpoint_requests"] = 1; }
  std::vector<std::pair<int64_t, std::string>> written;
};

TEST(HostHooks, AHookAsksForACheckpointAndTheLoopWritesItBeforeTheNextBatch) {
  Context context;
  auto loop = test::assembled("hook-request", {"loop.epochs=1"}, context);
  auto hook = std::make_shared<CheckpointAtFive>();
  loop->hooks().add(hook, priority::normal);
  loop->run();
  ASSERT_EQ(hook->written.size(), 2u) << "the requested one and the epoch's end";
  EXPECT_EQ(hook->written[0].first, 5);
  EXPECT_NE(hook->written[0].second.find("i00000005"), std::string::npos) << hook->written[0].second;
  EXPECT_EQ(hook->written[1].first, 16);
  const std::string metrics = test::read_file(loop->paths().metrics);
  EXPECT_NE(metrics.find("\"checkpoint_requests\""), std::string::npos) << metrics;
}

}  // namespace
}  // namespace trainyard::host
