// Weight averaging (`ema:`): timm's decay and warmup, every N-th update, batch
// norm statistics averaged or copied, exact resume, the averaged weights
// tested beside the trained ones and exported, equal on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "formats/metrics.h"
#include "support/data_parallel.h"
#include "support/support.h"
#include "train/epoch_loop.h"
#include "train/hooks.h"
#include "train/weight_average.h"

namespace trainyard::host {
namespace {

// The average computed here in double, from the weights after each update,
// with timm's ModelEmaV3 formula written out: the reference for the host's.
class ReferenceAverage final : public HostHook {
 public:
  ReferenceAverage(double decay, int64_t every) : decay_(decay), every_(every) {}
  std::string name() const override { return "reference average"; }
  void before_run(LoopState& t) override {
    for (const auto& p : t.network().parameters()) average.push_back(p.detach().to(at::kDouble));
  }
  void after_update(LoopState& t, const UpdateOutcome&) override {
    ++updates;
    if (updates % every_ != 0) return;
    const double d = std::min(decay_, 1.0 - std::pow(1.0 + static_cast<double>(updates), -2.0 / 3.0));
    decays.push_back(d);
    const auto params = t.network().parameters();
    for (size_t i = 0; i < params.size(); ++i)
      average[i] = d * average[i] + (1 - d) * params[i].detach().to(at::kDouble);
  }
  int64_t updates = 0;
  std::vector<double> decays;
  std::vector<at::Tensor> average;

 private:
  double decay_;
  int64_t every_;
};

TEST(WeightAverage, FollowsTimmsWarmupAndBlendsInEveryNthUpdate) {
  Context context;
  // 16 batches an epoch, 2 epochs: 32 updates, averaged at every 3rd (10 times).
  auto trainer = test::assembled("ema-formula", {"ema.enabled=true", "ema.decay=0.95", "ema.every_updates=3"}, context);
  auto reference = std::make_shared<ReferenceAverage>(0.95, 3);
  trainer->hooks().add(reference, priority::lowest);
  trainer->run();
  WeightAverage* average = weight_average_of(trainer->hooks());
  ASSERT_NE(average, nullptr);
  EXPECT_EQ(average->updates(), 32);
  ASSERT_EQ(reference->decays.size(), 10u);
  // Warmup: 1 - (1 + 3)^(-2/3) = 0.603 at the first averaging step; capped at 0.95 from update 89 on (not reached).
  EXPECT_NEAR(reference->decays.front(), 0.6031, 1e-4);
  EXPECT_DOUBLE_EQ(average->last_decay(), reference->decays.back());
  EXPECT_DOUBLE_EQ(average->decay_at(100000), 0.95);
  Network& net = trainer->network();
  std::vector<at::Tensor> trained;
  for (const auto& p : net.parameters()) trained.push_back(p.detach().clone());
  {
    const WeightAverage::Swap swap = average->swapped_into(net);
    const auto params = net.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_LT((params[i].detach().to(at::kDouble) - reference->average[i]).abs().max().item<double>(), 1e-6);
      EXPECT_FALSE(params[i].detach().equal(trained[i]));
    }
  }
  // The trained weights are back, bit for bit.
  const auto params = net.parameters();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(params[i].detach().equal(trained[i]));
}

TEST(WeightAverage, BatchNormStatisticsAreAveragedOrTheTrainedOnesAreUsed) {
  for (const std::string buffers : {"average", "copy"}) {
    Context context;
    std::string yaml = test::synthetic_experiment("ema-bn");
    const std::string mlp = "{plugin: mlp, hidden_sizes: [32], dropout: 0.1}";
    yaml.replace(yaml.find(mlp), mlp.size(), "{plugin: convnet, channels: [4], convs_per_block: 1, hidden: 8}");
    auto trainer = test::assembled("ema-bn-" + buffers, {"ema.enabled=true", "ema.buffers=" + buffers}, context, yaml);
    trainer->run();
    Network& net = trainer->network();
    std::map<std::string, at::Tensor> trained;
    for (const auto& b : net.named_buffers()) trained[b.key()] = b.value().clone();
    ASSERT_FALSE(trained.empty()) << "the convnet has batch norm";
    const WeightAverage::Swap swap = weight_average_of(trainer->hooks())->swapped_into(net);
    for (const auto& b : net.named_buffers()) {
      if (!at::isFloatingType(b.value().scalar_type())) {
        EXPECT_TRUE(b.value().equal(trained[b.key()])) << b.key() << ": counters are copied, not averaged";
        continue;
      }
      if (buffers == "copy")
        EXPECT_TRUE(b.value().equal(trained[b.key()])) << b.key();
      else
        EXPECT_FALSE(b.value().equal(trained[b.key()])) << b.key() << " lags the trained statistics";
    }
  }
}

// Runs EXP into OUT; returns the run directory.
std::string run(const std::string& exp, const std::string& out, const std::string& more = "") {
  const auto r = test::trainyard("run " + exp + " --output-dir " + out + " " + more);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return out + "/ema";
}

TEST(WeightAverage, ResumesExactlyIsTestedBesideTheTrainedWeightsAndIsExported) {
  const std::string exp = test::temp_dir("exp-ema") + "/ema.yaml";
  std::string yaml =
      test::synthetic_experiment("ema", "ema: {enabled: true, evaluate: true, every_updates: 2, warmup_power: 0.75}\n");
  // A meter with result files: they are the trained weights' pass, as without ema.
  yaml.replace(yaml.find("  - plugin: loss\n"), 17,
               "  - plugin: loss\n  - {plugin: confusion_matrix, phases: [test]}\n");
  test::write_file(exp, yaml);
  // Straight to 2 epochs; 1 epoch and then resumed to 2; and without ema at all.
  const std::string straight_out = test::temp_dir("ema-straight");
  const std::string straight = run(exp, straight_out);
  const std::string resumed_out = test::temp_dir("ema-resumed");
  run(exp, resumed_out, "--set loop.epochs=1");
  const std::string resumed = run(exp, resumed_out, "--allow-config-change");
  const std::string plain = run(exp, test::temp_dir("ema-none"), "--set ema.enabled=false --set ema.evaluate=false");
  const std::string a = test::latest_checkpoint(straight), b = test::latest_checkpoint(resumed);
  EXPECT_EQ(test::compare_checkpoint_networks(a, b), "");
  EXPECT_EQ(test::compare_checkpoint_networks(a, b, "part_ema"), "") << "the average resumes exactly";
  // Averaging and testing the average leave training as it was, bit for bit,
  // and the meters' result files are the trained weights'.
  EXPECT_EQ(test::compare_checkpoint_networks(a, test::latest_checkpoint(plain)), "");
  size_t results = 0;
  for (const auto& f : std::filesystem::directory_iterator(plain + "/meters")) {
    const std::string name = f.path().filename().string();
    ++results;
    EXPECT_EQ(test::read_file(straight + "/meters/" + name), test::read_file(f.path().string())) << name;
  }
  EXPECT_GE(results, 2u);

  // Every test logs both: test_* on the trained weights, test_ema_* on the average.
  std::vector<MetricsEvent> tests;
  for (const auto& e : read_events(straight + "/metrics.jsonl"))
    if (e.phase == "test") tests.push_back(e);
  ASSERT_EQ(tests.size(), 2u);
  for (const auto& e : tests) {
    EXPECT_TRUE(e.values.count("test_accuracy_top1"));
    EXPECT_TRUE(e.values.count("test_ema_accuracy_top1"));
    EXPECT_TRUE(e.values.count("test_ema_loss"));
    EXPECT_NE(e.values.at("test_ema_loss"), e.values.at("test_loss"));
  }
  // eval --weights ema of the last checkpoint gives the logged test_ema values.
  const std::string values = test::temp_dir("ema-eval") + "/values.json";
  const auto eval =
      test::trainyard("eval " + exp + " --output-dir " + straight_out + " --weights ema --output " + values);
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const auto evaluated = nlohmann::json::parse(test::read_file(values))["values"];
  EXPECT_DOUBLE_EQ(evaluated["test_loss"].get<double>(), tests.back().values.at("test_ema_loss"));
  EXPECT_DOUBLE_EQ(evaluated["test_accuracy_top1"].get<double>(), tests.back().values.at("test_ema_accuracy_top1"));

  // export --weights ema writes the average; PyTorch loads it strictly and the
  // two exports differ.
  const std::string dir = test::temp_dir("ema-export");
  for (const std::string w : {"trained", "ema"}) {
    const auto x = test::trainyard("export " + straight + " --weights " + w + " --output " + dir + "/" + w + ".pt");
    ASSERT_EQ(x.exit_code, 0) << x.err;
  }
  const auto check =
      test::run_command(::trainyard::test::python() +
                        " -c \"import torch, sys; a = torch.load(sys.argv[1]); b = torch.load(sys.argv[2]); "
                        "print(sorted(a) == sorted(b), max((a[k] - b[k]).abs().max().item() for k in a))\" " +
                        dir + "/trained.pt " + dir + "/ema.pt");
  ASSERT_EQ(check.exit_code, 0) << check.err;
  EXPECT_TRUE(test::contains(check.out, "True ")) << check.out;
  EXPECT_FALSE(test::contains(check.out, "True 0.0\n")) << check.out;
}

TEST(WeightAverage, AskingForAnAverageARunDidNotKeepIsOneLine) {
  const std::string exp = test::temp_dir("exp-ema-none") + "/ema.yaml";
  test::write_file(exp, test::synthetic_experiment("ema"));
  const std::string out = test::temp_dir("ema-none-out");
  run(exp, out);
  const auto x = test::trainyard("export " + out + "/ema --weights ema --output " + out + "/m.pt");
  EXPECT_EQ(x.exit_code, 2);
  EXPECT_EQ(test::nonempty_lines(x.err).size(), 1u) << x.err;
  EXPECT_TRUE(test::contains(x.err, "error: command line: --weights ema: ")) << x.err;
  EXPECT_TRUE(test::contains(x.err, "ema.enabled is false")) << x.err;
  // The average's values are names stopping and plots may use, with ema.evaluate only.
  EXPECT_EQ(test::trainyard("validate " + exp +
                            " --set ema.enabled=true --set ema.evaluate=true "
                            "--set stopping.monitor=test_ema_accuracy_top1")
                .exit_code,
            0);
  const auto monitor = test::trainyard("validate " + exp + " --set stopping.monitor=test_ema_accuracy_top1");
  EXPECT_EQ(monitor.exit_code, 2);
  EXPECT_TRUE(test::contains(monitor.err, "no meter value 'test_ema_accuracy_top1'")) << monitor.err;
  const auto e = test::trainyard("validate " + exp + " --set ema.evaluate=true");
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_TRUE(test::contains(e.err, "ema.evaluate")) << e.err;
  EXPECT_TRUE(test::contains(e.err, "expected ema.enabled: true")) << e.err;
}

TEST(WeightAverage, EveryRankHoldsTheSameAverage) {
  const std::string dir = test::temp_dir("ema-dp");
  const std::string exp = test::dp_experiment("dp", "ema: {enabled: true, evaluate: true}\n");
  const auto ranks = test::launch_by_environment(exp + " --output-dir " + dir + "/out", 2);
  for (const auto& r : ranks) ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(test::contains(ranks[0].out, "trainyard: ema: the averaged weights are the same on all 2 ranks"))
      << ranks[0].out;
  EXPECT_TRUE(test::contains(test::read_file(dir + "/out/dp/metrics.jsonl"), "test_ema_accuracy_top1"));
}

}  // namespace
}  // namespace trainyard::host
