// loop.precision (autocast, loss scaling), network.memory_format, and where
// collective tensors live.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <chrono>
#include <cmath>

#include "config/experiment.h"
#include "data/loader.h"
#include "distributed/communicator.h"
#include "distributed/device.h"
#include "support/data_parallel.h"
#include "train/checkpoint.h"
#include "train/components.h"
#include "train/precision.h"
#include "train/trainer.h"
#include "util/text.h"

namespace trainyard::host {
namespace {

TEST(Precision, AutocastScopeRunsMatmulsInBf16AndRestoresTheState) {
  const at::Tensor a = at::randn({8, 8}), b = at::randn({8, 8});
  {
    AutocastScope autocast(at::kCPU, autocast_dtype("bf16-mixed"));
    EXPECT_EQ(at::mm(a, b).scalar_type(), at::kBFloat16);
    EXPECT_EQ(as_fp32(at::mm(a, b)).scalar_type(), at::kFloat);  // what losses and meters see
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
  EXPECT_EQ(at::mm(a, b).scalar_type(), at::kFloat);
  {
    AutocastScope none(at::kCPU, autocast_dtype("fp32"));
    EXPECT_EQ(at::mm(a, b).scalar_type(), at::kFloat);
  }
  EXPECT_EQ(autocast_dtype("fp16-mixed"), at::kHalf);
}

TEST(Precision, LossScalerBacksOffOnOverflowAndGrowsAfterTheInterval) {
  LossScaler s;
  s.enabled = true;
  EXPECT_EQ(s.factor(), 65536.0);
  EXPECT_FALSE(s.update(false));  // overflow: skip the update, halve the scale
  EXPECT_EQ(s.scale, 32768.0);
  EXPECT_EQ(s.skipped, 1);
  for (int64_t i = 0; i < LossScaler::kGrowthInterval - 1; ++i) ASSERT_TRUE(s.update(true));
  EXPECT_EQ(s.scale, 32768.0);
  EXPECT_TRUE(s.update(true));  // the 2000th finite update in a row
  EXPECT_EQ(s.scale, 65536.0);
  EXPECT_EQ(s.finite_in_a_row, 0);
  LossScaler off;
  EXPECT_EQ(off.factor(), 1.0);
  EXPECT_TRUE(off.update(false));  // disabled: never skips (the non-finite policy decides)
}

std::vector<double> test_losses(const std::string& run_dir) { return test::series(run_dir + "/metrics.jsonl", "test_loss"); }

std::string train(const std::string& name, const std::string& args) {
  const std::string out = test::temp_dir("out-" + name), exp = test::temp_dir("exp-" + name) + "/" + name + ".yaml";
  test::write_file(exp, test::synthetic_experiment(name));
  auto r = test::trainyard("run " + exp + " --output-dir " + out + " --set loop.epochs=3 " + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out + "/" + name;
}

TEST(Precision, Bf16MixedTrainsOnTheCpuLikeFp32) {
  const auto fp32 = test_losses(train("fp32", ""));
  const auto bf16 = test_losses(train("bf16", "--set loop.precision=bf16-mixed"));
  ASSERT_EQ(fp32.size(), 3u);
  ASSERT_EQ(bf16.size(), 3u);
  for (double l : bf16) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(bf16.back(), bf16.front());                          // it learns
  EXPECT_NE(bf16.back(), fp32.back());                           // in another precision
  EXPECT_NEAR(bf16.back(), fp32.back(), 0.15 * fp32.back() + 0.02);  // to about the same place
}

TEST(Precision, Fp16LossScalingRunsInTheTrainerAndItsStateIsCheckpointed) {
  // Users are refused fp16-mixed on the CPU (it is slow there), but CPU
  // autocast does run float16: set past validation, it drives the trainer's
  // scaler path for real. 16 updates: no growth, so every change of the
  // scale is a skipped overflow.
  const std::string path = test::temp_dir("exp-fp16run") + "/fp16run.yaml", out = test::temp_dir("out-fp16run");
  test::write_file(path, test::synthetic_experiment("fp16run"));
  Experiment e = validate_experiment(read_experiment(path, {"loop.epochs=1", "optimizer.lr=0.001"}),
                                     test::builtin_registry());
  e.loop.precision = "fp16-mixed";
  Context context;
  context.seed = e.seed;
  torch::manual_seed(e.seed);
  Components c = build_components(e, context);
  {
    // A 30x larger last layer makes the first layer's float16 weight gradient
    // (times the initial scale of 65536) overflow: the first updates must be
    // skipped and the scale halved until it fits, as GradScaler does.
    at::NoGradGuard no_grad;
    at::Tensor last_weight;
    for (const auto& p : c.network.object->parameters())
      if (p.dim() == 2) last_weight = p;
    last_weight.mul_(30);
  }
  Trainer trainer(e, std::move(c), context, RunPaths(out));
  trainer.run();
  const double scale = trainer.values().at("loss_scale");
  const double skipped = trainer.values().count("scaler_skipped_updates") ? trainer.values().at("scaler_skipped_updates") : 0;
  std::printf("fp16 on the CPU: loss scale %g after %g skipped updates\n", scale, skipped);
  EXPECT_EQ(scale, LossScaler::kInitialScale * std::pow(LossScaler::kBackoff, skipped));
  EXPECT_GE(skipped, 1);
  EXPECT_LT(skipped, 16);
  const auto losses = test_losses(out);
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_TRUE(std::isfinite(losses[0]));
  // The checkpoint carries the scaler, so a resume continues with it.
  auto net = trainer.network_module();
  CheckpointState state = load_checkpoint(test::latest_checkpoint(out), *net, trainer.optimizer());
  EXPECT_EQ(state.loss_scale, scale);
  EXPECT_EQ(state.loss_scale_skipped, static_cast<int64_t>(skipped));
  EXPECT_LE(state.loss_scale_finite_in_a_row, 16 - static_cast<int64_t>(skipped));
  EXPECT_GT(state.loss_scale_finite_in_a_row, 0);
}

// `trainyard validate` of the synthetic experiment with one --set: its stderr.
std::string validate_error(const std::string& set) {
  const std::string exp = test::temp_dir("exp-validate") + "/validate.yaml";
  test::write_file(exp, test::synthetic_experiment("validate"));
  auto r = test::trainyard("validate " + exp + " --set " + set);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  return r.err;
}

TEST(Precision, Fp16MixedOnTheCpuIsRefusedAtValidate) {
  const std::string err = validate_error("loop.precision=fp16-mixed");
  EXPECT_TRUE(test::contains(err, "error: --set loop.precision=fp16-mixed: loop.precision: fp16-mixed needs a GPU")) << err;
  EXPECT_TRUE(test::contains(err, "use precision: bf16-mixed on the CPU")) << err;
}

TEST(Precision, AnUnknownPrecisionListsTheChoices) {
  const std::string err = validate_error("loop.precision=bf16");
  EXPECT_TRUE(test::contains(err, "expected one of fp32, bf16-mixed, fp16-mixed, got 'bf16'")) << err;
}

TEST(MemoryFormat, ChannelsLastPutsWeightsAndInputsInNhwcEvenWithOneChannel) {
  // Fashion-MNIST has one channel: a [N, 1, H, W] tensor passes for channels-last
  // with its NCHW strides, and the convolutions then ran NCHW (found by the
  // precision benchmark: channels_last was 1.01x). The channel stride must be 1.
  Experiment e = validate_experiment(
      read_experiment(test::source_dir() + "/experiments/fashion_mnist_convnet.yaml", {"network.memory_format=channels_last"}),
      test::builtin_registry());
  Context context;
  context.seed = e.seed;
  Components c = build_components(e, context);
  int convolutions = 0;
  for (const auto& p : c.network.object->parameters())
    if (p.dim() == 4) {
      ++convolutions;
      EXPECT_EQ(p.stride(1), 1) << "weight " << p.sizes() << " has strides " << p.strides();
    }
  EXPECT_EQ(convolutions, 2);
  BatchStream batches = batch_stream(*c.train_data.object, {0, 1, 2, 3}, 0, 0,
                                     make_loader_options(e, *c.train_data.config, 4, context));
  auto batch = batches();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->input.sizes(), (std::vector<int64_t>{4, 1, 28, 28}));
  EXPECT_EQ(batch->input.stride(1), 1) << batch->input.strides();
}

TEST(Collectives, EveryCollectiveTensorLivesWhereTheBackendWantsIt) {
  // The one function both paths use: NCCL on the rank's own GPU, Gloo on the CPU.
  const c10::Device cpu(c10::DeviceType::CPU), gpu1(c10::DeviceType::CUDA, 1);
  EXPECT_EQ(collective_device(cpu), cpu);
  EXPECT_EQ(collective_device(gpu1), gpu1);
  EXPECT_FALSE(uses_nccl(cpu));
  EXPECT_TRUE(uses_nccl(gpu1));
  // A real Gloo group (one rank, file rendezvous) asks the same function.
  World world;
  world.rendezvous = "file";
  world.rendezvous_file = test::temp_dir("gloo-one") + "/store";
  Communicator comm(world, std::chrono::seconds(10), cpu);
  EXPECT_EQ(comm.device(), collective_device(cpu));
  EXPECT_EQ(comm.collectives().device(), comm.device());
  EXPECT_EQ(comm.sum({1.5, 2.0}), (std::vector<double>{1.5, 2.0}));
  EXPECT_TRUE(comm.any(true));
  EXPECT_FALSE(comm.any(false));
  comm.barrier();
  // A tensor elsewhere than device() is refused by name rather than sent.
  at::Tensor wrong = at::zeros({2}, at::kDouble).to(at::kMeta);
  try {
    comm.allreduce(wrong);
    FAIL() << "a meta tensor was all-reduced";
  } catch (const std::exception& e) {
    EXPECT_TRUE(test::contains(e.what(), "a tensor on meta given to a group whose tensors live on cpu")) << e.what();
  }
}

}  // namespace
}  // namespace trainyard::host
