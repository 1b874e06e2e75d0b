// The train/test loop, run for real on synthetic data by the trainyard binary:
// learning, meters, overrides, callback order, and resuming.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <filesystem>
#include <functional>
#include <set>

#include "plugins/library_loader.h"
#include "support/support.h"
#include "train/grad_norm.h"
#include "train/guard.h"
#include "train/update.h"
#include "trainyard/meter.h"
#include "trainyard/optimizer.h"

#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <sstream>

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

using test::contains;

struct RunOutput {
  std::string dir;      ///< output dir
  std::string run_dir;  ///< dir/<name>
  test::CommandResult result;
};

RunOutput run(const std::string& name, const std::string& more = "", const std::string& args = "",
              const std::string& out_dir = "") {
  RunOutput r;
  r.dir = out_dir.empty() ? test::temp_dir("out-" + name) : out_dir;
  r.run_dir = r.dir + "/" + name;
  const std::string exp = test::temp_dir("exp-" + name) + "/" + name + ".yaml";
  test::write_file(exp, test::synthetic_experiment(name, more));
  r.result = test::trainyard("run " + exp + " --output-dir " + r.dir + " --plugin-dir " +
                             test::fixture_dir("components") + " " + args);
  return r;
}

std::vector<double> metric_series(const std::string& metrics_file, const std::string& key) {
  std::vector<double> out;
  for (const auto& line : test::read_lines(metrics_file)) {
    auto at = line.find("\"" + key + "\": ");
    if (at != std::string::npos) out.push_back(std::stod(line.substr(at + key.size() + 4)));
  }
  return out;
}

using test::latest_checkpoint;

TEST(Loop, LossGoesDownAndTestAccuracyRisesOnSyntheticData) {
  RunOutput r = run("learn", "", "--set loop.epochs=3");
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  auto losses = metric_series(r.run_dir + "/metrics.jsonl", "train_loss");
  ASSERT_GE(losses.size(), 3u);
  EXPECT_LT(losses.back(), 0.5 * losses.front());
  auto accuracy = metric_series(r.run_dir + "/metrics.jsonl", "test_accuracy_top1");
  ASSERT_EQ(accuracy.size(), 3u);  // one test pass per epoch
  EXPECT_GT(accuracy.back(), 0.9);
}

TEST(Loop, TestsEveryNIterationsAndAtEpochEnd) {
  // 512 samples / 32 = 16 iterations per epoch; test every 5 -> 5, 10, 15, 16(end), 20, 25, 30, 32(end).
  RunOutput r = run("every", "", "--set loop.test_every_iters=5 --set loop.test_samples=64");
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  std::vector<int> iterations;
  for (const auto& line : test::read_lines(r.run_dir + "/metrics.jsonl"))
    if (contains(line, "\"phase\": \"test\"")) {
      auto at = line.find("\"iteration\": ");
      iterations.push_back(std::stoi(line.substr(at + 13)));
    }
  EXPECT_EQ(iterations, (std::vector<int>{5, 10, 15, 16, 20, 25, 30, 32}));
}

TEST(Loop, NoSecondTestPassWhenThePeriodicOneEndsTheEpoch) {
  RunOutput r = run("every8", "", "--set loop.test_every_iters=8");
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  std::vector<int> iterations;
  for (const auto& line : test::read_lines(r.run_dir + "/metrics.jsonl"))
    if (contains(line, "\"phase\": \"test\""))
      iterations.push_back(std::stoi(line.substr(line.find("\"iteration\": ") + 13)));
  EXPECT_EQ(iterations, (std::vector<int>{8, 16, 24, 32}));
}

// The built-in meters plugin's components, made as the host makes them for a
// dataset of `classes` classes.
class BuiltinMeters {
 public:
  explicit BuiltinMeters(int64_t classes) {
    load_plugin_folders({{test::builtin_plugin_dir(), "built-in"}}, registry_);
    context_.dataset.num_classes = classes;
  }
  std::shared_ptr<Meter> make(const std::string& name, std::map<std::string, Value> options) const {
    const auto& c = registry_.get(Kind::meter, name);
    return std::get<Factory<Meter>>(c.factory)(Options(std::move(options)), context_);
  }

 private:
  Registry registry_;
  Context context_;
};

TEST(Meters, LossAndTopkAreRightOnAKnownBatch) {
  BuiltinMeters meters(3);
  auto make = [&](const std::string& name, std::map<std::string, Value> options) { return meters.make(name, options); };
  auto loss = make("loss", {});
  auto topk = make("topk_accuracy", {{"k", std::vector<int64_t>{1, 2}}});
  // Sample 0: class 2 ranked 1st; sample 1: class 0 ranked 2nd; sample 2: class 1 ranked 3rd.
  Batch b1{at::zeros({2, 1}), at::tensor({2, 0}, at::kLong), {0, 1}};
  at::Tensor out1 = at::tensor({0.1f, 0.2f, 0.7f, 0.3f, 0.6f, 0.1f}).view({2, 3});
  Batch b2{at::zeros({1, 1}), at::tensor({1}, at::kLong), {2}};
  at::Tensor out2 = at::tensor({0.5f, 0.1f, 0.4f}).view({1, 3});
  at::Tensor l1 = at::tensor(1.0), l2 = at::tensor(4.0);
  for (auto* m : {loss.get(), topk.get()}) {
    m->reset();
    m->update({b1, out1, l1});
    m->update({b2, out2, l2});
  }
  EXPECT_DOUBLE_EQ(loss->values().at("loss"), (1.0 * 2 + 4.0 * 1) / 3);  // weighted by batch size
  EXPECT_DOUBLE_EQ(topk->values().at("accuracy_top1"), 1.0 / 3);
  EXPECT_DOUBLE_EQ(topk->values().at("accuracy_top2"), 2.0 / 3);
  // Accumulators restore the same values (checkpoints and cross-rank sums rely on it).
  auto fresh = make("topk_accuracy", {{"k", std::vector<int64_t>{1, 2}}});
  fresh->set_accumulators(topk->accumulators());
  EXPECT_EQ(fresh->values(), topk->values());
}

TEST(Meters, AMeterRestoredFromAccumulatorsAddsExactlyAsTheUninterruptedOne) {
  // The meters sum on the device and read back on demand: a resumed run's
  // meter (set_accumulators, then more updates) must end bitwise-equal.
  BuiltinMeters meters(4);
  auto make = [&](const std::string& name, std::map<std::string, Value> options) { return meters.make(name, options); };
  at::manual_seed(3);
  std::vector<Batch> batches;
  std::vector<at::Tensor> outputs, losses;
  for (int i = 0; i < 6; ++i) {
    batches.push_back(Batch{at::zeros({5, 1}), at::randint(0, 4, {5}, at::kLong), {}});
    outputs.push_back(at::randn({5, 4}));
    losses.push_back(at::rand({}) * 3);  // float32, as a real loss
  }
  for (const char* name : {"loss", "topk_accuracy", "confusion_matrix"}) {
    std::map<std::string, Value> options;
    if (std::string(name) == "topk_accuracy") options["k"] = std::vector<int64_t>{1, 3};
    auto whole = make(name, options), first = make(name, options), resumed = make(name, options);
    for (int i = 0; i < 6; ++i) whole->update({batches[i], outputs[i], losses[i]});
    for (int i = 0; i < 3; ++i) first->update({batches[i], outputs[i], losses[i]});
    resumed->set_accumulators(first->accumulators());
    for (int i = 3; i < 6; ++i) resumed->update({batches[i], outputs[i], losses[i]});
    EXPECT_EQ(resumed->accumulators(), whole->accumulators()) << name;
    EXPECT_EQ(resumed->values(), whole->values()) << name;
    whole->reset();
    EXPECT_TRUE(whole->values().empty()) << name;
  }
}

// An optimizer as the plugin builds it: its schema's defaults, then `set`.
std::unique_ptr<torch::optim::Optimizer> plugin_optimizer(const Registry& registry, const std::string& name,
                                                          std::vector<at::Tensor> params,
                                                          const std::map<std::string, Value>& set) {
  const auto& c = registry.get(Kind::optimizer, name);
  std::map<std::string, Value> options;
  for (const auto& spec : c.schema.specs())
    if (spec.default_value) options[spec.key] = *spec.default_value;
  for (const auto& [key, value] : set) options[key] = value;
  auto plugin = std::get<Factory<Optimizer>>(c.factory)(Options(options), Context{});
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::move(params));
  return plugin->build(std::move(groups));
}

// SGD as the plugin builds it (fused by default) against LibTorch's SGD::step.
std::unique_ptr<torch::optim::Optimizer> sgd(const Registry& registry, std::vector<at::Tensor> params, bool fused) {
  return plugin_optimizer(
      registry, "sgd", std::move(params),
      {{"lr", 0.1}, {"momentum", 0.9}, {"nesterov", true}, {"weight_decay", 0.01}, {"fused", fused}});
}

// What the optimizer comparisons below train: a matrix, a vector, a
// channels_last 4-d tensor and one that gets no gradient (start), and
// fresh leaves holding their values (copy).
struct ComparedParameters {
  std::vector<at::Tensor> start;
  explicit ComparedParameters(uint64_t seed) {
    at::manual_seed(seed);
    start = {at::randn({7, 5}), at::randn({5}), at::randn({4, 3, 2, 2}).contiguous(at::MemoryFormat::ChannelsLast),
             at::randn({3})};
  }
  std::vector<at::Tensor> copy() const {
    std::vector<at::Tensor> p;
    for (const auto& t : start) p.push_back(t.clone(at::MemoryFormat::Preserve).requires_grad_(true));
    return p;
  }
};

// One step of a fixed loss of those parameters (the last one is not in it).
void compared_step(std::vector<at::Tensor>& p, torch::optim::Optimizer& o, int i) {
  o.zero_grad();
  ((p[0].sin() * (i + 1)).sum() + p[1].square().sum() + (p[2] * p[2].cos()).sum()).backward();
  o.step();
}

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>, bool)>;
struct Resumed {
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::vector<at::Tensor> params;
};

// An optimizer made two ways from the same parameters, make(params, true)
// (fused or foreach) and make(params, false) (LibTorch's own step): `steps`
// updates agree within (rtol, atol), the parameter without a gradient stays
// untouched, and each way's state resumes in the other, and in itself bit
// for bit, for 3 more updates. Returns the first way resumed from the
// second's state, for checks of its own.
Resumed expect_updates_agree_and_states_resume(const MakeOptimizer& make, uint64_t seed, int steps, double rtol,
                                               double atol, const std::string& what) {
  const ComparedParameters params(seed);
  std::vector<at::Tensor> a = params.copy(), b = params.copy();
  auto first = make(a, true), second = make(b, false);
  for (int i = 0; i < steps; ++i) compared_step(a, *first, i), compared_step(b, *second, i);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(at::allclose(a[k], b[k], rtol, atol)) << what << " " << k;
  EXPECT_TRUE(a[3].equal(params.start[3])) << what;  // no gradient: untouched
  EXPECT_FALSE(a[0].equal(params.start[0])) << what;
  std::ostringstream saved_first, saved_second;
  torch::save(*first, saved_first);
  torch::save(*second, saved_second);
  std::vector<at::Tensor> c = params.copy(), d = params.copy(), e = params.copy();
  for (size_t k = 0; k < c.size(); ++k) {
    at::NoGradGuard no_grad;
    c[k].copy_(a[k]), d[k].copy_(b[k]), e[k].copy_(a[k]);
  }
  auto second_from_first = make(c, false), first_from_second = make(d, true), first_from_first = make(e, true);
  std::istringstream in_first(saved_first.str()), in_second(saved_second.str()), again(saved_first.str());
  torch::load(*second_from_first, in_first);
  torch::load(*first_from_second, in_second);
  torch::load(*first_from_first, again);
  for (int i = steps; i < steps + 3; ++i) {
    compared_step(a, *first, i), compared_step(c, *second_from_first, i);
    compared_step(d, *first_from_second, i), compared_step(e, *first_from_first, i);
  }
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_TRUE(at::allclose(c[k], a[k], rtol, atol)) << what << " " << k;
    EXPECT_TRUE(at::allclose(d[k], a[k], rtol, atol)) << what << " " << k;
    EXPECT_TRUE(e[k].equal(a[k])) << what << " " << k << ": a resume in the same way continues bit for bit";
  }
  return {std::move(first_from_second), std::move(d)};
}

TEST(Optimizers, FusedSgdMakesLibTorchsUpdatesAndSharesItsCheckpoints) {
  Registry registry;
  load_plugin_folders({{test::builtin_plugin_dir(), "built-in"}}, registry);
  expect_updates_agree_and_states_resume(
      [&](std::vector<at::Tensor> params, bool fused) { return sgd(registry, std::move(params), fused); }, 5, 5, 1e-5,
      1e-6, "sgd");
}

// Adam and AdamW as the plugin builds them (fused by default) against
// LibTorch's own step: with and without AMSGrad and weight decay.
std::unique_ptr<torch::optim::Optimizer> adam(const Registry& registry, const std::string& name,
                                              std::vector<at::Tensor> params, bool fused, bool amsgrad) {
  return plugin_optimizer(registry, name, std::move(params),
                          {{"lr", 0.01}, {"weight_decay", 0.05}, {"amsgrad", amsgrad}, {"fused", fused}});
}

TEST(Optimizers, FusedAdamAndAdamWMakeLibTorchsUpdatesAndShareItsCheckpoints) {
  Registry registry;
  load_plugin_folders({{test::builtin_plugin_dir(), "built-in"}}, registry);
  for (const std::string name : {"adam", "adamw"})
    for (const bool amsgrad : {false, true})
      expect_updates_agree_and_states_resume(
          [&](std::vector<at::Tensor> params, bool fused) {
            return adam(registry, name, std::move(params), fused, amsgrad);
          },
          6, 6, 1e-5, 1e-6, name + (amsgrad ? " amsgrad" : ""));
}

// RMSprop as the plugin builds it (foreach by default) against LibTorch's
// RMSprop::step: plain, with momentum, centered, with weight decay.
TEST(Optimizers, ForeachRmspropMakesLibTorchsUpdatesAndSharesItsCheckpoints) {
  Registry registry;
  load_plugin_folders({{test::builtin_plugin_dir(), "built-in"}}, registry);
  const std::vector<std::pair<std::string, std::map<std::string, Value>>> settings = {
      {"plain", {}},
      {"momentum", {{"momentum", 0.9}}},
      {"centered", {{"centered", true}}},
      {"weight decay", {{"weight_decay", 0.05}}},
      {"all", {{"momentum", 0.5}, {"centered", true}, {"weight_decay", 0.01}, {"decay", 0.9}, {"eps", 1e-6}}}};
  for (const auto& [what, set] : settings) {
    auto rmsprop = [&, &set = set](std::vector<at::Tensor> params, bool foreach) {
      std::map<std::string, Value> options = set;
      options["lr"] = 0.01;
      options["foreach"] = foreach;
      return plugin_optimizer(registry, "rmsprop", std::move(params), options);
    };
    const Resumed resumed = expect_updates_agree_and_states_resume(rmsprop, 7, 6, 1e-6, 1e-7, what);
    const auto& state = static_cast<const torch::optim::RMSpropParamState&>(
        *resumed.optimizer->state().at(resumed.params[0].unsafeGetTensorImpl()));
    EXPECT_EQ(state.step(), 9) << what;
  }
}

// Every multi-tensor operator call (aten::_foreach_*, aten::_fused_*) made
// on this thread while it lives, as ATen's dispatcher records it (its
// RecordFunction callbacks): for each tensor-list argument, the dtype and
// device of each tensor. The CPU kernels loop per tensor and take any mix;
// CUDA's fused kernels refuse one ("params, grads, exp_avgs, and exp_avg_sqs
// must have same dtype, device, and layout") and its foreach kernels leave
// their fast path, so the mix is what a CPU test can see of a GPU failure.
class MultiTensorCalls {
 public:
  MultiTensorCalls() {
    sink() = &calls_;
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&MultiTensorCalls::record).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  }
  ~MultiTensorCalls() {
    at::removeCallback(handle_);
    sink() = nullptr;
  }
  MultiTensorCalls(const MultiTensorCalls&) = delete;
  MultiTensorCalls& operator=(const MultiTensorCalls&) = delete;

  size_t count() const { return calls_.size(); }
  /// "" or the first call whose tensors are not all of one dtype and one
  /// device (a fused Adam's step counts, float32 by design, left out).
  std::string first_mixed() const {
    for (const Call& call : calls_) {
      std::set<std::string> kinds;
      const bool adam = call.name.rfind("aten::_fused_adam", 0) == 0;
      for (size_t k = 0; k < call.lists.size(); ++k)
        if (!(adam && k == 5))
          for (const std::string& kind : call.lists[k]) kinds.insert(kind);
      if (kinds.size() > 1) {
        std::string all;
        for (const auto& kind : kinds) all += " " + kind;
        return call.name + " mixes" + all;
      }
    }
    return "";
  }

 private:
  struct Call {
    std::string name;
    std::vector<std::vector<std::string>> lists;  ///< "Float on cpu" per tensor
  };
  static std::vector<Call>*& sink() {
    static thread_local std::vector<Call>* calls = nullptr;
    return calls;
  }
  static std::unique_ptr<at::ObserverContext> record(const at::RecordFunction& fn) {
    const std::string name = fn.name();
    if (!sink() || (name.rfind("aten::_foreach_", 0) != 0 && name.rfind("aten::_fused_", 0) != 0)) return nullptr;
    Call call{name, {}};
    for (const c10::IValue& v : fn.inputs()) {
      if (!v.isTensorList()) continue;
      std::vector<std::string> list;
      for (const at::Tensor& t : v.toTensorList())
        list.push_back(std::string(c10::toString(t.scalar_type())) + " on " + t.device().str());
      call.lists.push_back(std::move(list));
    }
    sink()->push_back(std::move(call));
    return nullptr;
  }
  std::vector<Call> calls_;
  at::CallbackHandle handle_ = 0;
};

// A group of float32 and bfloat16 parameters (a network with a bf16 part):
// every optimizer's fused or foreach calls, stepping and skipping on the
// device, and the host's gradient helpers (norm, clamping, scaling by a
// factor kept on the device) take one dtype and one device per call.
TEST(Optimizers, EveryFusedAndForeachCallTakesOneDtypeAndOneDevice) {
  Registry registry;
  load_plugin_folders({{test::builtin_plugin_dir(), "built-in"}}, registry);
  const auto mixed = [] {
    at::manual_seed(3);
    return std::vector<at::Tensor>{at::randn({7, 5}).requires_grad_(), at::randn({5}, at::kBFloat16).requires_grad_(),
                                   at::randn({4, 3}).requires_grad_(), at::randn({6}, at::kBFloat16).requires_grad_()};
  };
  const std::vector<std::pair<std::string, std::map<std::string, Value>>> optimizers = {
      {"sgd", {{"lr", 0.1}, {"momentum", 0.9}, {"nesterov", true}, {"weight_decay", 0.01}}},
      {"sgd", {{"lr", 0.1}}},
      {"adam", {{"lr", 0.01}, {"weight_decay", 0.05}}},
      {"adamw", {{"lr", 0.01}, {"amsgrad", true}}},
      {"rmsprop", {{"lr", 0.01}, {"momentum", 0.5}, {"centered", true}, {"weight_decay", 0.01}}}};
  for (const auto& [name, options] : optimizers) {
    std::vector<at::Tensor> p = mixed();
    const std::vector<at::Tensor> start = [&] {
      std::vector<at::Tensor> copies;
      for (const auto& t : p) copies.push_back(t.detach().clone());
      return copies;
    }();
    auto optimizer = plugin_optimizer(registry, name, p, options);
    MultiTensorCalls calls;
    for (int i = 0; i < 3; ++i) {
      optimizer->zero_grad();
      at::Tensor loss = at::zeros({});
      for (const auto& t : p) loss = loss + (t.to(at::kFloat).sin() * (i + 1)).sum();
      loss.backward();
      auto* skippable = dynamic_cast<trainyard::SkippableStep*>(optimizer.get());
      if (skippable && i == 1)
        skippable->step_unless(at::zeros({}));  // checks kept on the device: nothing to skip
      else
        optimizer->step();
    }
    EXPECT_GT(calls.count(), 0u) << name << ": no fused or foreach call";
    EXPECT_EQ(calls.first_mixed(), "") << name;
    for (size_t k = 0; k < p.size(); ++k) EXPECT_FALSE(p[k].detach().equal(start[k])) << name << " " << k;
  }
  std::vector<at::Tensor> grads;
  for (const auto& t : mixed()) grads.push_back(at::randn_like(t));
  MultiTensorCalls calls;
  const at::Tensor norm = squared_norm_tensor(grads).sqrt();
  clamp_gradients(grads, 0.5);
  scale_gradients_by(grads, at::where(norm > 1.0, 1.0 / norm, 1.0));  // a factor kept on the device
  clip_gradients(grads, 0.2, 0.1);                                    // by value and by a norm read back
  EXPECT_GT(calls.count(), 0u);
  EXPECT_EQ(calls.first_mixed(), "");
}

TEST(Overrides, NoTestNoCheckpointReplacesBothStages) {
  const std::string events_file = test::temp_dir("rec") + "/events";
  RunOutput r = run("notest",
                    "overrides: [{plugin: no_test_no_checkpoint}]\n"
                    "callbacks: [{plugin: recorder, path: " +
                        events_file + "}]\n");
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  EXPECT_FALSE(fs::exists(r.run_dir + "/checkpoints"));
  EXPECT_FALSE(contains(test::read_file(r.run_dir + "/metrics.jsonl"), "\"phase\": \"test\""));
  std::string events = test::read_file(events_file);
  EXPECT_TRUE(contains(events, "after_epoch 2")) << events;
  EXPECT_FALSE(contains(events, "before_test")) << events;
  EXPECT_TRUE(contains(test::read_file(r.run_dir + "/summary.json"), "\"epochs_completed\": 2"));
}

TEST(Overrides, OverfitBatchesTrainsOnTheFirstBatchesOnly) {
  RunOutput r = run("overfit", "overrides: [{plugin: overfit_batches, batches: 2}]\n", "--set loop.epochs=20");
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  std::string summary = test::read_file(r.run_dir + "/summary.json");
  EXPECT_TRUE(contains(summary, "\"iteration\": 40")) << summary;  // 20 epochs x 2 batches
  auto losses = metric_series(r.run_dir + "/metrics.jsonl", "train_loss");
  EXPECT_LT(losses.back(), 0.05);  // memorized
}

TEST(Overrides, ProgressFollowsTheOverriddenEpochLengthAfterTheFirstEpoch) {
  // The plan says 16 batches; overfit_batches trains 2. After the first
  // epoch, the progress lines count to 2 (before it, the host cannot know).
  RunOutput r = run("overfit_progress",
                    "overrides: [{plugin: overfit_batches, batches: 2}]\n"
                    "callbacks: [{plugin: console, progress: never, plain_every_secs: 0.000001}]\n",
                    "--set loop.epochs=3");
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  EXPECT_TRUE(contains(r.result.out, "] 2/16  12%")) << r.result.out;
  for (const char* line : {"epoch 2/3 [####################] 2/2 100%", "epoch 3/3 [####################] 2/2 100%"})
    EXPECT_TRUE(contains(r.result.out, line)) << line << "\n" << r.result.out;
}

TEST(Overrides, TwoOverridesOfOneStageNeedAnExplicitOrder) {
  RunOutput r = run("twice", "overrides: [{plugin: no_test_no_checkpoint}, {plugin: no_test_no_checkpoint}]\n");
  EXPECT_EQ(r.result.exit_code, 2);
  EXPECT_TRUE(contains(r.result.err, "both replace stage 'checkpoint' and no explicit order is given")) << r.result.err;
  EXPECT_FALSE(fs::exists(r.run_dir));
  RunOutput ordered = run("ordered",
                          "overrides: [{plugin: no_test_no_checkpoint, order: 2}, "
                          "{plugin: no_test_no_checkpoint, order: 1}]\n");
  EXPECT_EQ(ordered.result.exit_code, 0) << ordered.result.err;
}

TEST(Overrides, AConfigErrorInsideAWrappedDefaultStageNamesItsOwnKeyOnce) {
  // The monitored value does not exist, and is no misspelling of a value
  // the wiring check saw (those stop before training): found after the
  // first test, inside the default epoch stage that the override wraps. The
  // error is about stopping.monitor (line 15), not about the override.
  RunOutput r = run("wrapped",
                    "overrides: [{plugin: pass_through_epoch}]\n"
                    "stopping: {monitor: val_miou, patience: 2}\n");
  EXPECT_EQ(r.result.exit_code, 2) << r.result.err;
  EXPECT_TRUE(contains(r.result.err, "wrapped.yaml:15:")) << r.result.err;
  EXPECT_TRUE(contains(r.result.err, "stopping.monitor: no meter value 'val_miou'")) << r.result.err;
  EXPECT_FALSE(contains(r.result.err, "pass_through_epoch")) << r.result.err;
  EXPECT_FALSE(contains(r.result.err, "overrides[0]")) << r.result.err;
}

TEST(Failures, NestedComponentCallsPutTheInnermostLocationInFrontOnce) {
  // An override's stage calling a default stage that calls a component: the
  // component's entry is where the error is.
  ComponentConfig outer, inner;
  outer.key = "overrides[0]";
  outer.where = "exp.yaml:14:3: overrides[0]";
  inner.key = "dataset.train";
  inner.where = "exp.yaml:4:10: dataset.train";
  try {
    guarded(outer, "stage epoch", [&] { guarded(inner, "get_batch", [] { throw ConfigError("no such file"); }); });
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "exp.yaml:4:10: dataset.train (dataset.train): no such file");
  }
  // A ConfigError thrown by the override's own code names the override.
  try {
    guarded(outer, "stage epoch", [] { throw ConfigError("bad option"); });
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "exp.yaml:14:3: overrides[0] (overrides[0]): bad option");
  }
}

TEST(Callbacks, RunInPriorityOrderAndSeeEveryStage) {
  const std::string events = test::temp_dir("rec") + "/events";
  RunOutput r = run("order",
                    "callbacks:\n"
                    "  - {plugin: recorder, path: " +
                        events +
                        ", tag: late, priority: 5}\n"
                        "  - {plugin: recorder, path: " +
                        events +
                        ", tag: early, priority: -1}\n"
                        "  - {plugin: recorder, path: " +
                        events + ", tag: middle}\n",
                    "--set loop.epochs=1");
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  auto lines = test::read_lines(events);
  std::vector<std::string> expected;
  for (const char* stage : {"before_run", "before_epoch 0", "before_train_iter 0", "before_test", "after_test 3",
                            "after_epoch 1", "before_checkpoint", "after_checkpoint", "after_run"})
    for (const char* tag : {"early", "middle", "late"}) expected.push_back(std::string(tag) + " " + stage);
  EXPECT_EQ(lines, expected);
}

TEST(Callbacks, AnAfterEpochThatThrowsIsCalledAgainByTheResume) {
  // after_epoch runs before the epoch's checkpoint: when it throws at epoch
  // 2, the latest checkpoint is epoch 1's, and the resume trains epoch 2
  // again and calls after_epoch 2 again. (Were the checkpoint written
  // first, the resume would continue after it: epoch 2's call lost.)
  const std::string dir = test::temp_dir("owed");
  const std::string calls = dir + "/calls", marker = dir + "/thrown";
  const std::string callbacks =
      "callbacks: [{plugin: throw_once, path: " + calls + ", marker: " + marker + ", epoch: 2}]\n";
  RunOutput first = run("owed", callbacks, "--set loop.epochs=3");
  ASSERT_NE(first.result.exit_code, 0) << first.result.err;
  EXPECT_TRUE(contains(first.result.err, "throw_once fixture: after_epoch 2")) << first.result.err;
  EXPECT_TRUE(fs::exists(marker));
  EXPECT_EQ(test::read_lines(calls), (std::vector<std::string>{"after_epoch 1"}));
  RunOutput second = run("owed", callbacks, "--set loop.epochs=3", first.dir);
  ASSERT_EQ(second.result.exit_code, 0) << second.result.err;
  EXPECT_TRUE(contains(second.result.out, "resuming from")) << second.result.out;
  EXPECT_TRUE(contains(second.result.out, "(epoch 1 done")) << second.result.out;
  EXPECT_EQ(test::read_lines(calls), (std::vector<std::string>{"after_epoch 1", "after_epoch 2", "after_epoch 3"}));
}

TEST(Resume, TwoEpochsEqualOneEpochThenResume) {
  RunOutput straight = run("straight", "", "--set loop.epochs=2");
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.err;
  RunOutput first = run("split", "", "--set loop.epochs=1");
  ASSERT_EQ(first.result.exit_code, 0) << first.result.err;
  RunOutput second = run("split", "", "--set loop.epochs=2", first.dir);
  ASSERT_EQ(second.result.exit_code, 0) << second.result.err;
  EXPECT_TRUE(contains(second.result.out, "resuming from")) << second.result.out;
  const std::string a = latest_checkpoint(straight.run_dir), b = latest_checkpoint(second.run_dir);
  EXPECT_EQ(fs::path(a).filename(), fs::path(b).filename());
  EXPECT_EQ(test::compare_checkpoint_networks(a, b), "");
}

TEST(Resume, ResumingFromAnOlderCheckpointDropsTheLaterMetrics) {
  RunOutput first = run("older", "", "--set loop.epochs=2 --set checkpoint.keep=0");
  ASSERT_EQ(first.result.exit_code, 0) << first.result.err;
  fs::remove(first.run_dir + "/checkpoints/ckpt-e0002-i00000032.pt");  // as if the run died before it
  RunOutput again = run("older", "", "--set loop.epochs=2", first.dir);
  ASSERT_EQ(again.result.exit_code, 0) << again.result.err;
  std::vector<int> test_iterations;
  for (const auto& line : test::read_lines(first.run_dir + "/metrics.jsonl"))
    if (contains(line, "\"phase\": \"test\""))
      test_iterations.push_back(std::stoi(line.substr(line.find("\"iteration\": ") + 13)));
  EXPECT_EQ(test_iterations, (std::vector<int>{16, 32}));
}

TEST(Resume, CheckpointOfADifferentNetworkIsRefused) {
  RunOutput first = run("reshape", "", "--set loop.epochs=1");
  ASSERT_EQ(first.result.exit_code, 0) << first.result.err;
  RunOutput second = run("reshape", "", "--set loop.epochs=2 --set network.hidden_sizes=[16]", first.dir);
  // The manifest records the configuration: refused before any weight is read.
  EXPECT_EQ(second.result.exit_code, 2);
  EXPECT_TRUE(contains(second.result.err, "belongs to another configuration")) << second.result.err;
  EXPECT_TRUE(contains(second.result.err, "network.hidden_sizes[0] 32 -> 16")) << second.result.err;
  EXPECT_TRUE(contains(second.result.err, "--fresh to start over")) << second.result.err;
  // Allowed anyway, the weights still do not fit: refused by shape.
  RunOutput forced =
      run("reshape", "", "--set loop.epochs=2 --set network.hidden_sizes=[16] --allow-config-change", first.dir);
  EXPECT_EQ(forced.result.exit_code, 2);
  EXPECT_TRUE(contains(forced.result.err, "checkpoint does not fit the network (file has layers.0.weight [32, 16]"))
      << forced.result.err;
  EXPECT_FALSE(fs::exists(first.run_dir + "/checkpoints/ckpt-e0002-i00000032.pt"));
}

TEST(Resume, PkBatchesStopMidEpochThenResumeEqualsStraightRun) {
  // 4 classes of 128: 2 classes x 16 samples a batch, 16 batches an epoch.
  const std::string pk = "--set loop.epochs=2 --set loop.classes_per_batch=2 --set loop.samples_per_class=16";
  RunOutput straight = run("pk_straight", "", pk);
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.err;
  RunOutput stopped = run("pk", "callbacks: [{plugin: stop_at, iteration: 21}]\n", pk);
  ASSERT_EQ(stopped.result.exit_code, 0) << stopped.result.err;
  RunOutput resumed = run("pk", "", pk, stopped.dir);
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.err;
  EXPECT_TRUE(contains(resumed.result.out, "epoch 1 done, iteration 21")) << resumed.result.out;
  EXPECT_TRUE(contains(resumed.result.out, "; P x K batches of 2 classes x 16 samples")) << resumed.result.out;
  EXPECT_TRUE(fs::exists(resumed.run_dir + "/checkpoints/ckpt-e0002-i00000032.pt"));
  EXPECT_EQ(test::compare_checkpoint_networks(latest_checkpoint(straight.run_dir), latest_checkpoint(resumed.run_dir)),
            "");
}

TEST(Resume, StopMidEpochThenResumeEqualsStraightRun) {
  RunOutput straight = run("mid_straight", "", "--set loop.epochs=2");
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.err;
  // Stop after iteration 21 (5 batches into epoch 2), then run again without the stop.
  RunOutput stopped = run("mid", "callbacks: [{plugin: stop_at, iteration: 21}]\n", "--set loop.epochs=2");
  ASSERT_EQ(stopped.result.exit_code, 0) << stopped.result.err;
  EXPECT_TRUE(fs::exists(stopped.run_dir + "/checkpoints/ckpt-e0001-i00000021.pt"));
  EXPECT_TRUE(contains(test::read_file(stopped.run_dir + "/summary.json"), "\"stopped\": \"stop_at fixture\""));
  RunOutput resumed = run("mid", "", "--set loop.epochs=2", stopped.dir);
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.err;
  EXPECT_TRUE(contains(resumed.result.out, "epoch 1 done, iteration 21")) << resumed.result.out;
  EXPECT_EQ(test::compare_checkpoint_networks(latest_checkpoint(straight.run_dir), latest_checkpoint(resumed.run_dir)),
            "");
  // The resumed epoch's train meters continue from the saved accumulators.
  auto a = metric_series(straight.run_dir + "/metrics.jsonl", "train_loss");
  auto b = metric_series(resumed.run_dir + "/metrics.jsonl", "train_loss");
  EXPECT_DOUBLE_EQ(a.back(), b.back());
  // One history: the resumed run's metrics.jsonl equals the straight run's, line for line but time.
  auto strip_time = [](std::vector<std::string> lines) {
    for (auto& l : lines) l.erase(l.find("\"time\": "), l.find(", \"values\"") - l.find("\"time\": "));
    return lines;
  };
  auto lines_a = strip_time(test::read_lines(straight.run_dir + "/metrics.jsonl"));
  auto lines_b = strip_time(test::read_lines(resumed.run_dir + "/metrics.jsonl"));
  ASSERT_EQ(lines_a.size(), lines_b.size());
  for (size_t i = 0; i < lines_a.size(); ++i) {
    if (contains(lines_a[i], "samples_per_sec")) continue;  // timings differ
    EXPECT_EQ(lines_a[i], lines_b[i]) << i;
  }
}

}  // namespace
}  // namespace trainyard::host
