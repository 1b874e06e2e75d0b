// Learning-rate schedules, gradient clipping and accumulation.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "config/step_rules.h"
#include "support/data_parallel.h"
#include "train/cuda_graph.h"
#include "train/epoch_loop.h"
#include "train/grad_norm.h"
#include "train/schedule.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

ScheduleConfig policy(const std::string& name) {
  ScheduleConfig s;
  s.policy = name;
  return s;
}

TEST(Schedule, EachPolicyAtKnownSteps) {
  EXPECT_DOUBLE_EQ(schedule_factor(policy("constant"), 77, 100, 0.1), 1.0);
  ScheduleConfig step = policy("step");
  step.boundaries = {10, 20};
  step.values = {0.1, 0.01, 0.001};
  EXPECT_DOUBLE_EQ(schedule_factor(step, 9, 100, 0.1), 1.0);
  EXPECT_NEAR(schedule_factor(step, 10, 100, 0.1), 0.1, 1e-12);
  EXPECT_NEAR(schedule_factor(step, 25, 100, 0.1), 0.01, 1e-12);
  ScheduleConfig multi = policy("multistep");
  multi.milestones = {30, 60};
  multi.gamma = 0.5;
  EXPECT_DOUBLE_EQ(schedule_factor(multi, 29, 100, 1), 1.0);
  EXPECT_DOUBLE_EQ(schedule_factor(multi, 60, 100, 1), 0.25);
  ScheduleConfig exp = policy("exp");
  exp.gamma = 0.5;
  exp.decay_steps = 10;
  EXPECT_NEAR(schedule_factor(exp, 15, 100, 1), std::pow(0.5, 1.5), 1e-12);
  exp.staircase = true;
  EXPECT_DOUBLE_EQ(schedule_factor(exp, 15, 100, 1), 0.5);
  ScheduleConfig cosine = policy("cosine");
  EXPECT_DOUBLE_EQ(schedule_factor(cosine, 0, 100, 1), 1.0);
  EXPECT_NEAR(schedule_factor(cosine, 50, 100, 1), 0.5, 1e-12);
  EXPECT_NEAR(schedule_factor(cosine, 100, 100, 1), 0.0, 1e-12);
  cosine.min_factor = 0.1;
  EXPECT_NEAR(schedule_factor(cosine, 100, 100, 1), 0.1, 1e-12);
  ScheduleConfig poly = policy("poly");
  poly.power = 2;
  EXPECT_NEAR(schedule_factor(poly, 50, 100, 1), 0.25, 1e-12);
}

TEST(Schedule, LinearWarmupThenTheScheduleOverTheRest) {
  ScheduleConfig s = policy("cosine");
  s.warmup_steps = 10;
  s.warmup_start_factor = 0.1;
  EXPECT_DOUBLE_EQ(schedule_factor(s, 0, 110, 1), 0.1);
  EXPECT_NEAR(schedule_factor(s, 5, 110, 1), 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(schedule_factor(s, 10, 110, 1), 1.0);  // cosine starts after warmup
  EXPECT_NEAR(schedule_factor(s, 60, 110, 1), 0.5, 1e-12);
}

TEST(GradientClipping, ByValueAndByGlobalNormOnKnownGradients) {
  std::vector<at::Tensor> g = {at::tensor({3.0, -4.0}), at::tensor({12.0})};
  EXPECT_DOUBLE_EQ(clip_gradients(g, 0, 0), 13.0);  // sqrt(9 + 16 + 144), untouched
  EXPECT_TRUE(g[1].equal(at::tensor({12.0})));
  clip_gradients(g, 0, 6.5);
  EXPECT_TRUE(g[0].allclose(at::tensor({1.5, -2.0})));
  EXPECT_TRUE(g[1].allclose(at::tensor({6.0})));
  std::vector<at::Tensor> h = {at::tensor({0.5, -3.0, 2.0})};
  double norm = clip_gradients(h, 1.0, 0);
  EXPECT_TRUE(h[0].equal(at::tensor({0.5, -1.0, 1.0})));
  EXPECT_DOUBLE_EQ(norm, 1.5);
}

TEST(GradientClipping, TheInPlaceFloatNormMatchesATenAndSeesEveryNonFiniteValue) {
  at::manual_seed(2);
  // Float32 CPU gradients are read in place; lengths around the 32-wide blocks.
  std::vector<at::Tensor> g = {at::randn({1000}), at::randn({31}), at::randn({7, 33}), at::randn({3, 4}).t()};
  double expected = 0;
  for (const auto& t : g) expected += t.to(at::kDouble).square().sum().item<double>();
  EXPECT_NEAR(clip_gradients(g, 0, 0), std::sqrt(expected), 1e-5 * std::sqrt(expected));
  for (int64_t at_index : {0L, 17L, 999L}) {  // in a block, and in the tail
    std::vector<at::Tensor> nan = {at::randn({1000})}, inf = {at::randn({1000})};
    nan[0][at_index] = NAN;
    inf[0][at_index] = -INFINITY;
    EXPECT_TRUE(std::isnan(clip_gradients(nan, 0, 0))) << at_index;
    EXPECT_TRUE(std::isinf(clip_gradients(inf, 0, 0))) << at_index;
  }
  // Squares past float's range are not an overflow of the gradients.
  std::vector<at::Tensor> big = {at::full({4}, 1e20f)};
  EXPECT_NEAR(clip_gradients(big, 0, 0), 2e20, 1e14);
}

TEST(GradientClipping, GradientsOutsideTheInPlacePathTakeOneForeachNormPerDtypeAndClipAsPerTensorCalls) {
  at::manual_seed(3);
  // Not contiguous float32 CPU tensors: what a GPU's gradients take (at::_foreach_norm per dtype).
  auto make = [] {
    return std::vector<at::Tensor>{at::randn({300}, at::kDouble), at::randn({64}).to(at::kBFloat16),
                                   at::randn({5, 7}).to(at::kHalf), at::randn({6, 9}).t(),
                                   at::randn({40}, at::kDouble)};
  };
  std::vector<at::Tensor> g = make();
  double expected = 0;
  for (const auto& t : g) expected += t.to(at::kDouble).square().sum().item<double>();
  std::vector<at::Tensor> reference;
  for (const auto& t : g) reference.push_back(t.clone());
  const double norm = clip_gradients(g, 0, 1.0);
  EXPECT_NEAR(norm, std::sqrt(expected), 1e-6 * std::sqrt(expected));
  // The scaling is each gradient's own multiply, bit for bit.
  for (size_t i = 0; i < g.size(); ++i) EXPECT_TRUE(g[i].equal(reference[i].mul(1.0 / norm))) << i;
  // Clamping by value, too.
  std::vector<at::Tensor> h = make(), h_reference;
  for (const auto& t : h) h_reference.push_back(t.clamp(-0.5, 0.5));
  clip_gradients(h, 0.5, 0);
  for (size_t i = 0; i < h.size(); ++i) EXPECT_TRUE(h[i].equal(h_reference[i])) << i;
  // A non-finite value in any group is seen.
  std::vector<at::Tensor> bad = make();
  bad[1][10] = NAN;
  EXPECT_TRUE(std::isnan(clip_gradients(bad, 0, 0)));
  std::vector<at::Tensor> overflow = make();
  overflow[2][1][3] = INFINITY;
  EXPECT_TRUE(std::isinf(clip_gradients(overflow, 0, 0)));
}

std::string run_dir_of(const std::string& name, const std::string& args) {
  const std::string out = test::temp_dir("out-" + name), exp = test::temp_dir("exp-" + name) + "/" + name + ".yaml";
  std::string yaml = test::synthetic_experiment(name);
  yaml.replace(yaml.find("dropout: 0.1"), 12, "dropout: 0.0");
  test::write_file(exp, yaml);
  auto r = test::trainyard("run " + exp + " --output-dir " + out + " " + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out + "/" + name;
}

TEST(GradientAccumulation, FourBatchesOfEightEqualOneBatchOfThirtyTwo) {
  const std::string big = run_dir_of("big", "--set loop.batch_per_device=32 --set loop.epochs=1");
  const std::string small =
      run_dir_of("small", "--set loop.batch_per_device=8 --set loop.iter_size=4 --set loop.epochs=1");
  // 512 samples: 16 updates either way; the small run checkpoints after 64 batches.
  EXPECT_LT(test::max_checkpoint_difference(big + "/checkpoints/ckpt-e0001-i00000016.pt",
                                            small + "/checkpoints/ckpt-e0001-i00000064.pt"),
            1e-5);
}

std::vector<double> lrs(const std::string& run_dir) { return test::series(run_dir + "/metrics.jsonl", "lr"); }

TEST(Schedule, SteppedPerIterationOrPerEpochInARealRun) {
  // 16 updates per epoch, 2 epochs, logs every 4 iterations (+ each epoch end).
  const std::string per_iter = run_dir_of("iter",
                                          "--set schedule.policy=multistep --set schedule.milestones=[8]"
                                          " --set schedule.gamma=0.5");
  auto a = lrs(per_iter);
  ASSERT_GE(a.size(), 4u);
  EXPECT_DOUBLE_EQ(a[0], 0.05);       // iteration 4: update 3 ran at step 3 < 8
  EXPECT_DOUBLE_EQ(a.back(), 0.025);  // after update 8
  const std::string per_epoch = run_dir_of("epoch",
                                           "--set schedule.policy=multistep --set schedule.milestones=[1]"
                                           " --set schedule.gamma=0.5 --set schedule.unit=epoch");
  auto b = lrs(per_epoch);
  EXPECT_DOUBLE_EQ(b[0], 0.05);       // epoch 0
  EXPECT_DOUBLE_EQ(b.back(), 0.025);  // epoch 1
  const std::string exp = test::temp_dir("exp-invalid") + "/invalid.yaml";
  test::write_file(exp, test::synthetic_experiment("invalid"));
  auto r = test::trainyard("validate " + exp + " --set schedule.policy=step --set schedule.boundaries=[5]");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(test::contains(r.err, "policy step has 1 boundaries and 0 values")) << r.err;
}

TEST(Schedule, ACustomScheduleIsAnOverrideOfTheScheduleStage) {
  // one_cycle over 32 updates: up for the first 30% (from lr/10), then down to far below the start.
  const std::string run = run_dir_of("one_cycle",
                                     "--set schedule.policy=custom"
                                     " --set 'overrides=[{plugin: one_cycle, div_factor: 10}]'");
  auto a = lrs(run);
  ASSERT_GE(a.size(), 6u);
  const auto peak = std::max_element(a.begin(), a.end());
  EXPECT_GT(peak - a.begin(), 0);
  EXPECT_LT(a.front(), 0.6 * *peak);
  EXPECT_LT(a.back(), 0.1 * a.front());
  EXPECT_LE(*peak, 0.05);
  // Step 3 of 32 (the first log, after update 3 ran at step 3): cosine from 0.1 to 1 over 9.6 steps.
  EXPECT_NEAR(a[0], 0.05 * (1 + (0.1 - 1) * 0.5 * (1 + std::cos(M_PI * 3 / 9.6))), 1e-9);

  const std::string exp = test::temp_dir("exp-custom") + "/custom.yaml";
  test::write_file(exp, test::synthetic_experiment("custom"));
  auto r = test::trainyard("validate " + exp + " --set schedule.policy=custom");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(test::contains(r.err, "no additional_override replaces stage 'schedule'")) << r.err;
  EXPECT_TRUE(test::contains(r.err, "one_cycle")) << r.err;
}

std::vector<double> train_losses(const std::string& run_dir) {
  std::vector<double> out;
  for (const auto& line : test::read_lines(run_dir + "/metrics.jsonl")) {
    auto at = line.find("\"train_loss\": ");
    if (at != std::string::npos) out.push_back(std::stod(line.substr(at + 14)));
  }
  return out;
}

TEST(Optimizers, RmspropAndAdamwTrain) {
  for (const char* name : {"rmsprop", "adamw"}) {
    auto losses = train_losses(
        run_dir_of(name, std::string("--set 'optimizer={plugin: ") + name + ", lr: 0.003}' --set loop.epochs=3"));
    ASSERT_GE(losses.size(), 3u) << name;
    EXPECT_LT(losses.back(), 0.5 * losses.front()) << name;
  }
}

TEST(GradientClipping, GradNormIsLoggedAndClippingChangesTraining) {
  const std::string plain = run_dir_of("plain", "--set loop.epochs=1");
  const std::string clipped = run_dir_of("clipped", "--set loop.epochs=1 --set loop.clip_grad_norm=0.01");
  EXPECT_TRUE(test::contains(test::read_file(plain + "/metrics.jsonl"), "\"grad_norm\": "));
  EXPECT_GT(test::max_checkpoint_difference(plain + "/checkpoints/ckpt-e0001-i00000016.pt",
                                            clipped + "/checkpoints/ckpt-e0001-i00000016.pt"),
            1e-3);
}

TEST(CudaGraph, ARunThatCannotCaptureItsStepIsRefusedWithTheReason) {
  // What the experiment file says, checked before anything runs.
  const std::string exp = test::temp_dir("exp-graph") + "/graph.yaml";
  test::write_file(exp, test::synthetic_experiment("graph"));
  const std::pair<std::string, std::string> refused[] = {
      {"",
       "loop.cuda_graph: CUDA graphs need a GPU; expected distributed.num_gpus 1 with loop.cuda_graph: true, got 0"},
      {" --set distributed.num_gpus=1 --set loop.iter_size=2",
       "a captured step is one batch's update; expected loop.iter_size 1 with loop.cuda_graph: true, got 2"},
      {" --set distributed.num_gpus=1 --set loop.precision=fp16-mixed", "fp16-mixed's loss scaler"},
      {" --set distributed.num_gpus=1 --set loop.update_checks_every=1", "(loop.update_checks_every is 1)"}};
  for (const auto& [args, message] : refused) {
    auto r = test::trainyard("validate " + exp + " --set loop.cuda_graph=true" + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_TRUE(test::contains(r.err, "error: ") && test::contains(r.err, message)) << args << "\n" << r.err;
  }
  // What only the run knows, checked as it starts. One table for both: the run's own facts, and the Updater's answer on its checks.
  CudaGraphFacts able;
  able.built_with_cuda = true, able.cuda = true, able.world_size = 1;
  able.checks_read_every_update = "", able.fixed_sample_shape = true;
  EXPECT_EQ(cuda_graph_refusal(able), std::nullopt);
  auto with = [&](auto change) {
    CudaGraphFacts c = able;
    change(c);
    const auto refusal = cuda_graph_refusal(c);
    return refusal ? refusal->line() : std::string("(nothing refused)");
  };
  EXPECT_TRUE(test::contains(with([](auto& c) { c.built_with_cuda = false; }), "without CUDA"));
  EXPECT_TRUE(test::contains(with([](auto& c) { c.cuda = false; }), "CPU"));
  EXPECT_TRUE(test::contains(with([](auto& c) { c.world_size = 2; }), "2 processes"));
  EXPECT_TRUE(test::contains(with([](auto& c) { c.checks_read_every_update = "--debug checks every loss"; }),
                             "(--debug checks every loss)"));
  EXPECT_TRUE(test::contains(with([](auto& c) { c.fixed_sample_shape = false; }), "fixed sample shape"));
  EXPECT_TRUE(test::contains(with([](auto& c) { c.train_step_overridden = true; }), "train_step"));
}

// The rule the Updater chooses its non-finite policy by, and loop.cuda_graph
// refuses by: stated once (config/step_rules.h); a fact not known yet (the
// file's auto, an optimizer not built) refuses nothing.
TEST(UpdateChecks, TheHostReadsEveryUpdateForTheReasonsTheRuleNames) {
  CheckPlacementFacts kept;
  kept.checks_every = 4, kept.optimizer_skips = true;
  EXPECT_EQ(why_checks_read_every_update(kept), "");
  EXPECT_EQ(why_checks_read_every_update(CheckPlacementFacts()), "");  // nothing known yet
  auto with = [&](auto change) {
    CheckPlacementFacts f = kept;
    change(f);
    return why_checks_read_every_update(f);
  };
  EXPECT_TRUE(test::contains(with([](auto& f) { f.checks_every = 1; }), "update_checks_every is 1"));
  EXPECT_TRUE(test::contains(with([](auto& f) { f.loss_scaler = true; }), "fp16-mixed"));
  EXPECT_TRUE(test::contains(with([](auto& f) { f.debug = true; }), "--debug"));
  EXPECT_TRUE(test::contains(with([](auto& f) { f.find_lr = true; }), "find-lr"));
  EXPECT_TRUE(test::contains(with([](auto& f) { f.optimizer_skips = false; }), "skip a step on the device"));
  EXPECT_EQ(with([](auto& f) { f.optimizer_skips = false, f.nonfinite = "ignore"; }), "");
}

// What a replay checks its gradients by: a parameter the loss never reached
// at the capture (an unused head) got no gradient, as in an eager step, and
// is not checked; a captured gradient replaced (set to none, reassigned) is.
TEST(CudaGraph, AReplayChecksTheCapturedGradientsAndNotAnUnusedParameters) {
  std::vector<at::Tensor> params = {at::zeros({3}).requires_grad_(), at::zeros({2}).requires_grad_(),
                                    at::zeros({4}).requires_grad_()};
  params[0].mutable_grad() = at::ones({3});
  params[2].mutable_grad() = at::ones({4});
  // As after the capture: the unused parameter (1) has no gradient, nullptr recorded.
  const std::vector<const void*> captured = {params[0].grad().const_data_ptr(), nullptr,
                                             params[2].grad().const_data_ptr()};
  EXPECT_EQ(replaced_gradient(params, captured), std::nullopt);
  params[0].grad().zero_();  // zeroed in place: still the graph's tensor
  EXPECT_EQ(replaced_gradient(params, captured), std::nullopt);
  params[2].mutable_grad().reset();  // zero_grad(set_to_none)
  EXPECT_EQ(replaced_gradient(params, captured), std::optional<size_t>(2));
  params[2].mutable_grad() = at::ones({4});  // assigned anew: another tensor
  EXPECT_EQ(replaced_gradient(params, captured), std::optional<size_t>(2));
}

// --profile A:B with loop.cuda_graph: the capture waits for the profiler,
// which starts before step A+1 (a profiler started after a capture is the
// order PyTorch reports failing); never before the 3 eager warm-up steps.
TEST(CudaGraph, TheCaptureComesAfterTheWarmUpAndAfterTheProfilerStarts) {
  EXPECT_EQ(capture_warmup(0), 3);
  EXPECT_EQ(capture_warmup(2), 3);
  EXPECT_EQ(capture_warmup(20), 20);
}

// A tensor of a checkpoint's network by dotted name, e.g. "layers.0.weight".
at::Tensor tensor_in(const std::string& checkpoint, const std::string& dotted) {
  torch::serialize::InputArchive root, current;
  root.load_from(checkpoint);
  root.read("network", current);
  std::vector<std::string> parts;
  for (size_t start = 0, dot;; start = dot + 1) {
    dot = dotted.find('.', start);
    parts.push_back(dotted.substr(start, dot - start));
    if (dot == std::string::npos) break;
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    torch::serialize::InputArchive next;
    current.read(parts[i], next);
    current = std::move(next);
  }
  at::Tensor t;
  current.read(parts.back(), t, /*is_buffer=*/false);
  return t;
}

const char* kEnd = "/checkpoints/ckpt-e0001-i00000016.pt";

TEST(GradientClipping, ChecksKeptOnTheDeviceTrainAsChecksReadEveryUpdate) {
  // Clipped by norm and by value, the norm and the factor left on the device
  // between reads every 4 updates: the same weights, momentum and logged norms.
  const std::string clip = "--set loop.epochs=1 --set loop.clip_grad_norm=0.5 --set loop.clip_grad_value=0.2";
  const std::string every = run_dir_of("read_every", clip);
  const std::string kept = run_dir_of("read_fourth", clip + " --set loop.update_checks_every=4");
  EXPECT_EQ(test::compare_checkpoint_networks(every + kEnd, kept + kEnd), "");
  EXPECT_EQ(test::compare_optimizer_states(every + kEnd, kept + kEnd), "");
  const auto norms = test::series(every + "/metrics.jsonl", "grad_norm");
  EXPECT_GE(norms.size(), 4u);
  EXPECT_EQ(norms, test::series(kept + "/metrics.jsonl", "grad_norm"));
}

TEST(ParameterGroups, AssignedByRegexAndTheOptimizerUsesTheirRates) {
  const std::string exp = test::temp_dir("exp-groups") + "/groups.yaml";
  test::write_file(exp, test::synthetic_experiment("groups"));
  auto r = test::trainyard("validate " + exp + " --set 'optimizer.param_groups=[{match: bias$, lr_mult: 0.0}]'" +
                           " --set optimizer.exempt_norm_and_bias=true");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "param_groups[0] (match 'bias$'): 2 tensors, 36 values, lr 0, weight decay"))
      << r.out;
  EXPECT_TRUE(test::contains(r.out, "layers.0.bias, layers.3.bias")) << r.out;  // layers.2 is the dropout
  EXPECT_TRUE(test::contains(r.out, "default: 2 tensors, 640 values, lr 0.05")) << r.out;
  // Trained with the biases' rate at 0: biases stay as initialized, weights move.
  const std::string initial = run_dir_of("initial", "--set loop.epochs=1 --set optimizer.lr=0");
  const std::string trained =
      run_dir_of("trained", "--set loop.epochs=1 --set 'optimizer.param_groups=[{match: bias$, lr_mult: 0.0}]'");
  EXPECT_TRUE(tensor_in(initial + kEnd, "layers.0.bias").equal(tensor_in(trained + kEnd, "layers.0.bias")));
  EXPECT_FALSE(tensor_in(initial + kEnd, "layers.0.weight").equal(tensor_in(trained + kEnd, "layers.0.weight")));
  r = test::trainyard("validate " + exp + " --set 'optimizer.param_groups=[{match: \"(\", lr_mult: 2}]'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(test::contains(r.err, "optimizer.param_groups[0].match: not a valid regular expression")) << r.err;
}

TEST(Freezing, FrozenParametersAndBatchNormStatisticsStayUnchanged) {
  const std::string initial = run_dir_of("initial", "--set loop.epochs=1 --set optimizer.lr=0");
  const std::string frozen = run_dir_of("frozen", "--set loop.epochs=1 --set 'network.freeze=[layers.0]'");
  EXPECT_TRUE(tensor_in(initial + kEnd, "layers.0.weight").equal(tensor_in(frozen + kEnd, "layers.0.weight")));
  EXPECT_FALSE(tensor_in(initial + kEnd, "layers.2.weight").equal(tensor_in(frozen + kEnd, "layers.2.weight")));
  const std::string trainable = run_dir_of("trainable", "--set loop.epochs=1 --set network.trainable=bias$");
  EXPECT_TRUE(tensor_in(initial + kEnd, "layers.2.weight").equal(tensor_in(trainable + kEnd, "layers.2.weight")));
  EXPECT_FALSE(tensor_in(initial + kEnd, "layers.2.bias").equal(tensor_in(trainable + kEnd, "layers.2.bias")));
  // A frozen convnet block: its batch norm's running statistics are not updated.
  const std::string conv = run_dir_of("conv",
                                      "--set loop.epochs=1 --set 'network={plugin: convnet, channels: [4], hidden: 0}'"
                                      " --set 'network.freeze=[features]'");
  at::Tensor mean;
  torch::serialize::InputArchive root, net, features, bn;
  root.load_from(conv + kEnd);
  root.read("network", net);
  net.read("features", features);
  features.read("1", bn);
  bn.read("running_mean", mean, /*is_buffer=*/true);
  EXPECT_TRUE(mean.equal(at::zeros({4}))) << mean;
  auto r =
      test::trainyard("validate " + test::temp_dir("exp-x") + "/../exp-conv/conv.yaml" +
                      " --set 'network={plugin: convnet, channels: [4], hidden: 0}' --set 'network.freeze=[featurs]'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(test::contains(r.err, "network.freeze: no submodule 'featurs'")) << r.err;
  EXPECT_TRUE(test::contains(r.err, "did you mean 'features'?")) << r.err;
}

TEST(Stopping, EarlyStoppingStopsAtTheRightEpochAndStaysStopped) {
  // With lr 0 the test loss never improves: best at epoch 1, then 2 epochs
  // without improvement, so the run stops after epoch 3 of 10.
  const std::string run = run_dir_of("early",
                                     "--set loop.epochs=10 --set optimizer.lr=0 --set stopping.monitor=test_loss"
                                     " --set stopping.patience=2");
  std::string summary = test::read_file(run + "/summary.json");
  EXPECT_TRUE(test::contains(summary, "\"epochs_completed\": 3")) << summary;
  EXPECT_TRUE(test::contains(summary, "\"stopped\": \"early stop: test_loss did not improve for 2 epochs")) << summary;
  EXPECT_TRUE(test::contains(summary, "\"best\": {\"meter\": \"test_loss\"")) << summary;
  // Run again: it resumes from epoch 3 and, having stopped early, trains no more.
  const fs::path base = fs::path(run).parent_path().parent_path();
  auto again = test::trainyard("run " + (base / "exp-early" / "early.yaml").string() + " --output-dir " +
                               fs::path(run).parent_path().string() +
                               " --set loop.epochs=10 --set optimizer.lr=0 --set stopping.monitor=test_loss"
                               " --set stopping.patience=2");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(test::contains(again.out, "done: 3/10 epochs")) << again.out;
}

TEST(Stopping, TargetReachedEndsTheRunAndBestCheckpointIsKept) {
  const std::string run = run_dir_of("target",
                                     "--set loop.epochs=6 --set stopping.target_meter=test_accuracy_top1"
                                     " --set stopping.target=0.95 --set stopping.monitor=test_accuracy_top1"
                                     " --set checkpoint.keep=1");
  std::string summary = test::read_file(run + "/summary.json");
  EXPECT_TRUE(test::contains(summary, "\"stopped\": \"target reached: test_accuracy_top1 ")) << summary;
  EXPECT_FALSE(test::contains(summary, "\"epochs_completed\": 6")) << summary;
  // best.pt survives rotation (checkpoint.keep 1) and is a loadable checkpoint.
  ASSERT_TRUE(fs::exists(run + "/checkpoints/best.pt"));
  EXPECT_NO_THROW(tensor_in(run + "/checkpoints/best.pt", "layers.0.weight"));
}

}  // namespace
}  // namespace trainyard::host
