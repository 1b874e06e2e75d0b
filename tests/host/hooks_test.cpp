// Host hooks: the loop's listeners in one priority order, the host's own
// duties among them, and room for new ones (weight averaging) without a
// change to the loop.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "support/support.h"
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

}  // namespace
}  // namespace trainyard::host
