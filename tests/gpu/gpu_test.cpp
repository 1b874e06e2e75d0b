// The GPU suite: run by scripts/test-gpu.sh on a machine with GPUs, never by
// ctest (CI has none). Gpu.* needs one GPU, MultiGpu.* two, or one under the
// test setting TRAINYARD_TEST_SHARED_GPU=1 (the ranks share it over Gloo:
// docs/distributed.md; the trainyard processes inherit the variable). Without
// GPUs each test skips, unless TRAINYARD_EXPECT_GPUS says how many there must
// be (the script sets it from nvidia-smi): then a LibTorch that sees fewer fails.
#include <gtest/gtest.h>

#include <torch/cuda.h>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "distributed/device.h"
#include "support/data_parallel.h"
#include "trainyard/version.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

int visible_gpus() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

// Skips (or fails, under scripts/test-gpu.sh) unless `needed` GPUs are visible.
#define REQUIRE_GPUS(needed)                                                                      \
  do {                                                                                            \
    const char* expected = std::getenv("TRAINYARD_EXPECT_GPUS");                                  \
    if (visible_gpus() < (needed)) {                                                              \
      if (expected && std::atoi(expected) >= (needed))                                            \
        FAIL() << "nvidia-smi lists " << expected << " GPUs but LibTorch sees " << visible_gpus() \
               << " (driver too old for CUDA " << TRAINYARD_CUDA << "? CUDA_VISIBLE_DEVICES?)";   \
      GTEST_SKIP() << "needs " << (needed) << " GPU(s), " << visible_gpus() << " visible";        \
    }                                                                                             \
  } while (0)

// MultiGpu.*: two ranks, on two GPUs, or on one they share under the test
// setting TRAINYARD_TEST_SHARED_GPU=1.
bool shared_gpu() { return host::ranks_share_gpu_for_tests(); }
#define REQUIRE_RANK_GPUS(ranks)                    \
  do {                                              \
    if (shared_gpu() && visible_gpus() >= 1) break; \
    REQUIRE_GPUS(ranks);                            \
  } while (0)

// A test whose point is two physical GPUs: skipped, saying why, when the ranks share one.
#define REQUIRE_TWO_PHYSICAL_GPUS(why)                                                                  \
  do {                                                                                                  \
    if (shared_gpu() && visible_gpus() < 2)                                                             \
      GTEST_SKIP() << "TRAINYARD_TEST_SHARED_GPU=1 with " << visible_gpus() << " GPU: the ranks share " \
                   << "it, and this test needs two physical GPUs (" << (why) << ")";                    \
    REQUIRE_GPUS(2);                                                                                    \
  } while (0)

// cuBLAS picks reduction orders per workspace: a fixed one makes runs repeatable.
const std::string kDeterministic = "CUBLAS_WORKSPACE_CONFIG=:4096:8 ";

std::string run_dir(const std::string& out) { return out + "/gpu"; }
std::string last(const std::string& out) { return run_dir(out) + "/checkpoints/" + kLastDpCheckpoint; }

CommandResult train(const std::string& out, const std::string& args, const std::string& more = "") {
  return trainyard_with_env(kDeterministic, "run " + dp_experiment("gpu", more) + " --output-dir " + out + " " + args);
}

// The data-parallel experiment with a small batch-norm convnet on
// [1, side, side] inputs instead of the MLP, named "gpu" (run_dir() finds it).
std::string convnet_experiment(const std::string& name, int channels, int side) {
  std::string yaml = read_file(dp_experiment(name));
  yaml.replace(0, yaml.find('\n'), "name: gpu");
  const std::string mlp = "{plugin: mlp, hidden_sizes: [32], dropout: 0.0}";
  yaml.replace(yaml.find(mlp), mlp.size(),
               "{plugin: convnet, channels: [" + std::to_string(channels) + "], dropout: 0.0, hidden: 0}");
  const std::string shape = "shape: [1, " + std::to_string(side) + ", " + std::to_string(side) + "]";
  for (int i = 0; i < 2; ++i) yaml.replace(yaml.find("shape: [1, 4, 4]"), 16, shape);
  const std::string path = temp_dir("convnet-" + name) + "/gpu.yaml";
  write_file(path, yaml);
  return path;
}

nlohmann::json json_of(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

// A line for the summary scripts/test-gpu.sh prints at the end ("gpu-metric: ...").
void metric(const std::string& name, const std::string& run_dir) {
  const auto summary = json_of(run_dir + "/summary.json");
  std::string peak;
  for (const auto& line : read_lines(run_dir + "/trainyard.log"))
    if (contains(line, "peak GPU memory: ")) peak = line.substr(line.find("peak GPU memory: ") + 17);
  std::printf("gpu-metric: %s: %.0f train samples/s, peak memory %s\n", name.c_str(),
              summary.value("samples_per_sec", 0.0), peak.c_str());
}

// Stops at iteration 9, resumes, and compares with an uninterrupted run.
// With `ranks` 2, rank 1's own log must say it resumed too (the other ranks
// show only warnings and errors on the console).
void expect_resume_bit_identical(const std::string& args, int ranks) {
  const std::string straight = temp_dir("straight"), split = temp_dir("split");
  const std::string with_fixtures = args + " --plugin-dir " + fixture_dir("components");
  ASSERT_EQ(train(straight, with_fixtures).exit_code, 0);
  ASSERT_EQ(train(split, with_fixtures, "callbacks: [{plugin: stop_at, iteration: 9}]\n").exit_code, 0);
  auto r = train(split, with_fixtures);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "trainyard: resuming from")) << r.out;
  if (ranks > 1)
    EXPECT_TRUE(contains(rank_log(run_dir(split), 1), "trainyard: resuming from")) << rank_log(run_dir(split), 1);
  EXPECT_EQ(compare_checkpoint_networks(last(straight), last(split)), "");
}

// loop.cuda_graph with --profile 8:12: 20 steps of 64 (eager warm-up steps
// until the profiler runs, the capture at the 9th, the first step it records,
// replays after: the profiler starts before the capture, the order PyTorch
// supports); the graph runs the same kernels on the same inputs.
TEST(Gpu, ACapturedStepTrainsAsTheEagerStepWithFewerLaunches) {
  REQUIRE_GPUS(1);
  for (const std::string& precision : {"fp32", "bf16-mixed"}) {
    const std::string eager = temp_dir("eager"), graphed = temp_dir("graphed");
    const std::string args = "--set distributed.num_gpus=1 --set loop.precision=" + precision + " --profile 8:12";
    auto a = train(eager, args);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    auto b = train(graphed, args + " --set loop.cuda_graph=true");
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_TRUE(contains(b.err + b.out, "loop.cuda_graph: the step is captured at iteration 9")) << b.err;
    EXPECT_LT(max_checkpoint_difference(last(eager), last(graphed)), 1e-6) << precision;
    const auto counts = [](const std::string& out) {
      return json_of(run_dir(out) + "/profile/rank0.profile_summary.json")["kernel_launches_per_step"].get<double>();
    };
    EXPECT_LT(counts(graphed), counts(eager)) << precision;
    std::printf("gpu-metric: cuda_graph %s: %.0f kernel launches per step eager, %.0f graphed\n", precision.c_str(),
                counts(eager), counts(graphed));
  }
}

// loop.cuda_graph with a layer the forward never uses and a float32 and a
// bfloat16 layer in one parameter group, under fused Adam: the capture gives
// the unused layer no gradient and the replays do not count it replaced;
// each fused call takes one dtype (CUDA's kernel refuses a mix). The graphed
// run trains as the eager one, and the unused layer stays as it started.
TEST(Gpu, ACapturedStepWithAnUnusedLayerAndABf16LayerTrainsUnderFusedAdam) {
  REQUIRE_GPUS(1);
  const std::string eager = temp_dir("heads-eager"), graphed = temp_dir("heads-graphed");
  const std::string args = "--set distributed.num_gpus=1 --plugin-dir " + fixture_dir("components") +
                           " --set 'network={plugin: heads, bf16_head: true, unused_head: true}'"
                           " --set 'optimizer={plugin: adam, lr: 0.01}'";
  auto a = train(eager, args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto b = train(graphed, args + " --set loop.cuda_graph=true");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_TRUE(contains(b.err + b.out, "loop.cuda_graph: the step is captured at iteration 4")) << b.err;
  EXPECT_LT(max_checkpoint_difference(last(eager), last(graphed)), 1e-2);  // bf16 layer: its rounding
  // Never trained (no gradient, eager or replayed): as the same seed made it in both.
  EXPECT_TRUE(checkpoint_tensor(last(graphed), "unused.weight").equal(checkpoint_tensor(last(eager), "unused.weight")));
}

TEST(Gpu, SingleDeviceTrainingLearnsLikeTheCpu) {
  REQUIRE_GPUS(1);
  const std::string cpu = temp_dir("cpu"), gpu = temp_dir("gpu");
  ASSERT_EQ(train(cpu, "").exit_code, 0);
  auto r = train(gpu, "--set distributed.num_gpus=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto a = series(run_dir(cpu) + "/metrics.jsonl", "test_loss"),
             b = series(run_dir(gpu) + "/metrics.jsonl", "test_loss");
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NEAR(a.back(), b.back(), 1e-3 * std::max(1.0, a.back()));  // other kernels, same arithmetic
  EXPECT_TRUE(contains(read_file(run_dir(gpu) + "/provenance.json"), "\"cuda\": \"" TRAINYARD_CUDA "\""));
}

TEST(Gpu, Bf16AndFp16MixedTrainWithFiniteFp32Losses) {
  REQUIRE_GPUS(1);
  for (const std::string precision : {"fp16-mixed", "bf16-mixed"}) {
    const std::string out = temp_dir(precision);
    auto r = train(out, "--set distributed.num_gpus=1 --set loop.precision=" + precision + " --set loop.epochs=3");
    if (precision == "bf16-mixed" && r.exit_code == 2) {  // a GPU before compute capability 8.0
      EXPECT_TRUE(contains(r.err, "bf16-mixed needs a GPU of compute capability 8.0 or newer")) << r.err;
      continue;
    }
    ASSERT_EQ(r.exit_code, 0) << precision << ": " << r.err;
    const auto losses = series(run_dir(out) + "/metrics.jsonl", "test_loss");
    ASSERT_EQ(losses.size(), 3u);
    for (double l : losses) EXPECT_TRUE(std::isfinite(l)) << precision;
    EXPECT_LT(losses.back(), losses.front()) << precision;
    if (precision == "fp16-mixed") {  // the scaler's state is logged and checkpointed
      EXPECT_FALSE(series(run_dir(out) + "/metrics.jsonl", "loss_scale").empty());
    }
  }
}

TEST(Gpu, PinnedSideStreamLoaderGivesTheSameRunWithAndWithoutDecodeThreads) {
  REQUIRE_GPUS(1);
  // Decode threads pin batches; the copy runs on a side stream one batch
  // ahead. A missing wait would show up as a different (racy) result.
  const std::string inline_decode = temp_dir("inline"), threaded = temp_dir("threaded");
  ASSERT_EQ(train(inline_decode, "--set distributed.num_gpus=1 --set loop.decode_threads=0").exit_code, 0);
  auto r = train(threaded, "--set distributed.num_gpus=1 --set loop.decode_threads=2 --set loop.prefetch_batches=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(compare_checkpoint_networks(last(inline_decode), last(threaded)), "");
}

TEST(Gpu, EightBitPhotoBatchesNormalizedOnTheGpuTrainAsFloatBatchesFromTheHost) {
  REQUIRE_GPUS(1);
  // The photo experiment's pipeline at 64 px: uint8 batches copied pinned on
  // the side stream and normalized on the compute stream (output: uint8),
  // against batches normalized per sample on the decode threads (output: float).
  auto run = [&](const std::string& output) {
    const std::string dir = temp_dir("photo-" + output), exp = dir + "/gpu.yaml";
    write_file(exp, "name: gpu\ndataset:\n  train: {plugin: image_folder, root: " + small_photo_set() +
                        "/train, color: rgb, crop: random_resized, crop_size: [64, 64], hflip: 0.5, "
                        "mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], output: " +
                        output +
                        "}\n"
                        "  test: {plugin: image_folder, root: " +
                        small_photo_set() +
                        "/val, color: rgb, "
                        "resize_short: 72, crop: center, crop_size: [64, 64], "
                        "mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], output: " +
                        output +
                        "}\n"
                        "network: {plugin: resnet, depth: 18, width: 8}\nloss: {plugin: cross_entropy}\n"
                        "optimizer: {plugin: sgd, lr: 0.01}\nmeters: [{plugin: loss}]\n"
                        "loop: {epochs: 2, batch_per_device: 4, decode_threads: 2, log_every_iters: 1}\n"
                        "distributed: {num_gpus: 1}\n");
    auto r = trainyard_with_env(kDeterministic, "run " + exp + " --output-dir " + dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(series(run_dir(dir) + "/metrics.jsonl", "test_loss").size(), 2u);
    return series(run_dir(dir) + "/metrics.jsonl", "grad_norm");
  };
  const auto pixels = run("uint8"), floats = run("float");
  ASSERT_EQ(pixels.size(), 12u);  // 10 iterations and 2 end-of-epoch events
  ASSERT_EQ(floats.size(), 12u);
  // Inputs equal to float rounding: the first updates agree closely. (Later
  // ones drift apart: on the CPU, batch norm over batches of 4 turns 1e-7
  // input differences into 3e-3 in the fourth gradient norm.)
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(pixels[i], floats[i], 1e-4 * floats[i]) << "iteration " << i + 1;
}

TEST(Gpu, Fp16RunInterruptedAndResumedIsBitIdentical) {
  REQUIRE_GPUS(1);
  expect_resume_bit_identical("--set distributed.num_gpus=1 --set loop.precision=fp16-mixed", 1);
}

TEST(Gpu, AutoPrecisionResolvesFromTheComputeCapability) {
  REQUIRE_GPUS(1);
  const std::string out = temp_dir("auto");
  auto r = train(out, "--set distributed.num_gpus=1 --set loop.precision=auto");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int major = [] {
    auto smi = run_command("nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0");
    return std::atoi(smi.out.c_str());
  }();
  const std::string expected = major >= 8 ? "bf16-mixed" : "fp16-mixed";
  EXPECT_EQ(json_of(run_dir(out) + "/config.json")["resolved_precision"]["precision"], expected);
  EXPECT_TRUE(contains(r.out, "trainyard: loop.precision auto: " + expected)) << r.out;
  // A CUDA run with a fixed sample shape turns cuDNN's autotuner on (loop.cudnn_benchmark: auto).
  const auto cudnn = json_of(run_dir(out) + "/provenance.json")["cudnn_benchmark"];
  EXPECT_EQ(cudnn["requested"], "auto");
  EXPECT_EQ(cudnn["used"], true) << cudnn;
  EXPECT_TRUE(contains(cudnn["reason"].get<std::string>(), "auto: a CUDA run with a fixed sample shape")) << cudnn;
}

TEST(Gpu, AutocastIsReallyOnBf16WeightsDifferAndTheTestLossStaysNearFp32) {
  REQUIRE_GPUS(1);
  const std::string fp32 = temp_dir("ac-fp32"), bf16 = temp_dir("ac-bf16");
  const std::string args = "--set distributed.num_gpus=1 --set loop.epochs=3 --set loop.precision=";
  ASSERT_EQ(train(fp32, args + "fp32").exit_code, 0);
  auto r = train(bf16, args + "bf16-mixed");
  if (r.exit_code == 2) GTEST_SKIP() << "a GPU before compute capability 8.0: " << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(max_checkpoint_difference(last(fp32), last(bf16)), 1e-5);  // other arithmetic: autocast was on
  const double a = series(run_dir(fp32) + "/metrics.jsonl", "test_loss").back(),
               b = series(run_dir(bf16) + "/metrics.jsonl", "test_loss").back();
  EXPECT_NEAR(a, b, 0.05 * std::max(a, 0.05)) << "fp32 " << a << ", bf16-mixed " << b;
  metric("1 GPU fp32", run_dir(fp32));
  metric("1 GPU bf16-mixed", run_dir(bf16));
}

TEST(Gpu, ACheckpointWrittenOnTheGpuEvaluatesOnTheCpu) {
  REQUIRE_GPUS(1);
  const std::string out = temp_dir("to-cpu");
  ASSERT_EQ(train(out, "--set distributed.num_gpus=1").exit_code, 0);
  auto r = trainyard_with_env(kDeterministic, "eval " + dp_experiment("gpu") + " --output-dir " + out +
                                                  " --set distributed.num_gpus=0 --output " + out + "/eval.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double on_gpu = json_of(run_dir(out) + "/summary.json")["metrics"]["test_loss"],
               on_cpu = json_of(out + "/eval.json")["values"]["test_loss"];
  EXPECT_NEAR(on_gpu, on_cpu, 1e-3 * std::max(1.0, on_gpu));
}

// Metric learning on the GPU: a 16-d embedding, semi-hard triplets on P x K
// batches, the retrieval meter (its embeddings kept on the GPU; with NCCL,
// gathered across ranks by Communicator::gather_rows) and ArcFace's centres.
std::string retrieval_experiment(const std::string& name, const std::string& loss) {
  const std::string path = temp_dir("exp-" + name) + "/" + name + ".yaml";
  write_file(path, "name: " + name +
                       "\nseed: 7\n"
                       "dataset:\n"
                       "  train: {plugin: synthetic, size: 512, num_classes: 4, shape: [1, 4, 4], seed: 1, noise: 2}\n"
                       "  test: {plugin: synthetic, size: 128, num_classes: 4, shape: [1, 4, 4], seed: 2, noise: 2}\n"
                       "network: {plugin: mlp, hidden_sizes: [32], embedding_size: 16, normalize: true}\n"
                       "loss: " +
                       loss +
                       "\n"
                       "optimizer: {plugin: sgd, lr: 0.05, momentum: 0.9}\n"
                       "meters:\n  - plugin: loss\n  - {plugin: retrieval, k: [1, 4], phases: [test]}\n"
                       "loop: {epochs: 3, batch_per_device: 32, classes_per_batch: 4, samples_per_class: 8}\n");
  return path;
}

TEST(Gpu, RetrievalAndArcFaceOnTheGpuEvaluateAsOnTheCpu) {
  REQUIRE_GPUS(1);
  for (const std::string loss : {"{plugin: triplet_margin, margin: 0.2, mining: semihard}",
                                 "{plugin: arcface, embedding_size: 16, scale: 16}"}) {
    const std::string exp = retrieval_experiment("retrieval-gpu", loss), out = temp_dir("retrieval-gpu");
    auto r =
        trainyard_with_env(kDeterministic, "run " + exp + " --output-dir " + out + " --set distributed.num_gpus=1");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto e = trainyard_with_env(kDeterministic, "eval " + exp + " --output-dir " + out +
                                                    " --set distributed.num_gpus=0 --output " + out + "/eval.json");
    ASSERT_EQ(e.exit_code, 0) << e.err;
    const auto on_gpu = json_of(out + "/retrieval-gpu/summary.json")["metrics"];
    const auto on_cpu = json_of(out + "/eval.json")["values"];
    for (const char* name : {"test_recall_at_1", "test_recall_at_4", "test_map_at_r"})
      EXPECT_NEAR(on_gpu[name].get<double>(), on_cpu[name].get<double>(), 2.0 / 128) << loss << " " << name;
  }
}

// A loss that reads the device within its step (semi-hard triplet mining:
// masked_select, .item()) cannot be captured: the capture is ended cleanly,
// one warning names the loss, and the run trains on eagerly, as the eager run.
TEST(Gpu, AStepThatReadsTheDeviceIsNotCapturedAndTrainsOnEagerly) {
  REQUIRE_GPUS(1);
  const std::string loss = "{plugin: triplet_margin, margin: 0.2, mining: semihard}";
  const std::string exp = retrieval_experiment("graph-mining", loss);
  const std::string eager = temp_dir("mining-eager"), graphed = temp_dir("mining-graphed");
  auto a =
      trainyard_with_env(kDeterministic, "run " + exp + " --output-dir " + eager + " --set distributed.num_gpus=1");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto b = trainyard_with_env(kDeterministic, "run " + exp + " --output-dir " + graphed +
                                                  " --set distributed.num_gpus=1 --set loop.cuda_graph=true");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(occurrences(b.err, "warning: loop.cuda_graph: the step could not be captured"), 1) << b.err;
  EXPECT_TRUE(contains(b.err, "triplet_margin")) << b.err;
  EXPECT_FALSE(contains(b.err + b.out, "the step is captured at")) << b.out;
  EXPECT_LT(max_checkpoint_difference(latest_checkpoint(eager + "/graph-mining"),
                                      latest_checkpoint(graphed + "/graph-mining")),
            1e-4);
}

TEST(Gpu, TheProfileOfAGpuRunHoldsItsKernelsAndTheAverageEvaluatesAsOnTheCpu) {
  REQUIRE_GPUS(1);
  const std::string out = temp_dir("profile-gpu");
  auto r =
      trainyard_with_env(kDeterministic, "run " + convnet_experiment("profile-gpu", 8, 8) + " --output-dir " + out +
                                             " --set distributed.num_gpus=1 --set ema.enabled=true"
                                             " --set ema.evaluate=true --profile 5:10");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Kineto with CUPTI: the device's kernels beside the CPU operators.
  const std::string summary = read_file(run_dir(out) + "/profile/rank0.summary.txt");
  EXPECT_TRUE(contains(summary, "kernel (device)")) << summary;
  EXPECT_TRUE(contains(summary, "iterations 6-10: 5 steps recorded")) << summary;
  // The step's split adds up on a GPU too (its user ranges are not counted twice).
  const std::vector<int> shares = profile_step_shares(summary);
  ASSERT_GE(shares.size(), 5u) << summary;
  int sum = 0;
  for (int share : shares) {
    EXPECT_GE(share, 0) << summary;
    sum += share;
  }
  EXPECT_NEAR(sum, 100, static_cast<int>(shares.size())) << summary;
  // The average kept on the GPU tests on the CPU as it tested on the GPU.
  // eval is given the experiment the run trained: its --set ema.enabled too (without it the
  // experiment keeps no average, and eval says so).
  auto e =
      trainyard_with_env(kDeterministic, "eval " + convnet_experiment("profile-gpu", 8, 8) + " --output-dir " + out +
                                             " --set ema.enabled=true --set ema.evaluate=true"
                                             " --weights ema --output " +
                                             out + "/eval.json");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const auto on_gpu = json_of(run_dir(out) + "/summary.json")["metrics"];
  const auto on_cpu = json_of(out + "/eval.json")["values"];
  EXPECT_NEAR(on_gpu["test_ema_loss"].get<double>(), on_cpu["test_loss"].get<double>(), 1e-3);
}

TEST(MultiGpu, EveryRankHoldsTheSameAverageOverNccl) {
  REQUIRE_RANK_GPUS(2);
  const std::string out = temp_dir("ema-nccl");
  auto r = trainyard_with_env(kDeterministic, "run " + convnet_experiment("ema-nccl", 8, 8) + " --output-dir " + out +
                                                  " --set distributed.num_gpus=2 --set ema.enabled=true");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "trainyard: ema: the averaged weights are the same on all 2 ranks")) << r.out;
}

TEST(MultiGpu, RetrievalOverNcclGathersEveryRanksEmbeddings) {
  REQUIRE_RANK_GPUS(2);
  const std::string exp = retrieval_experiment("retrieval-nccl", "{plugin: triplet_margin, margin: 0.2}");
  const std::string out = temp_dir("retrieval-nccl");
  auto r = trainyard_with_env(kDeterministic, "run " + exp + " --output-dir " + out +
                                                  " --set distributed.num_gpus=2 --set loop.batch_per_device=16"
                                                  " --set loop.samples_per_class=4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // One GPU evaluates the saved weights on all 128 samples; each rank had tested 64.
  auto e = trainyard_with_env(kDeterministic, "eval " + exp + " --output-dir " + out +
                                                  " --set distributed.num_gpus=1 --set loop.batch_per_device=16"
                                                  " --set loop.samples_per_class=4 --output " +
                                                  out + "/eval.json");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const auto two = json_of(out + "/retrieval-nccl/summary.json")["metrics"];
  const auto one = json_of(out + "/eval.json")["values"];
  for (const char* name : {"test_recall_at_1", "test_r_precision", "test_map_at_r"})
    EXPECT_NEAR(two[name].get<double>(), one[name].get<double>(), 1e-6) << name;
}

TEST(MultiGpu, TwoRanksOverNcclEqualOneGpuWithTheSameGlobalBatch) {
  REQUIRE_RANK_GPUS(2);
  const std::string one = temp_dir("one"), two = temp_dir("two");
  ASSERT_EQ(train(one, "--set distributed.num_gpus=1").exit_code, 0);
  auto r = train(two, "--set distributed.num_gpus=2 --set loop.batch_per_device=32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Rank 1 shows only warnings and errors on the console: its own log has its start-up line.
  EXPECT_TRUE(contains(rank_log(run_dir(two), 1), "trainyard: rank 1 of 2")) << rank_log(run_dir(two), 1);
  if (shared_gpu() && visible_gpus() == 1) {  // rank 0 says once that the ranks share the GPU, and why
    EXPECT_TRUE(contains(r.out, "trainyard: 2 ranks (0 and 1) share GPU GPU-")) << r.out;
    EXPECT_TRUE(contains(r.out, "because the test setting TRAINYARD_TEST_SHARED_GPU=1 is set")) << r.out;
    EXPECT_TRUE(contains(r.out, "; Gloo on 127.0.0.1 with cuda:0's tensors staged through host memory")) << r.out;
  }
  EXPECT_LT(max_checkpoint_difference(last(one), last(two)), 1e-4);
  EXPECT_EQ(series(run_dir(one) + "/metrics.jsonl", "test_accuracy_top1"),
            series(run_dir(two) + "/metrics.jsonl", "test_accuracy_top1"));
}

TEST(MultiGpu, SyncBatchNormOverNcclEqualsOneGpu) {
  REQUIRE_RANK_GPUS(2);
  auto exp = [](const std::string& name) { return convnet_experiment("bn-" + name, 4, 8); };
  const std::string one = temp_dir("bn-one"), two = temp_dir("bn-two");
  ASSERT_EQ(
      trainyard_with_env(kDeterministic, "run " + exp("a") + " --output-dir " + one + " --set distributed.num_gpus=1")
          .exit_code,
      0);
  auto r = trainyard_with_env(kDeterministic, "run " + exp("b") + " --output-dir " + two +
                                                  " --set distributed.num_gpus=2 --set loop.batch_per_device=32"
                                                  " --set distributed.sync_batch_norm=true");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(max_checkpoint_difference(last(one), last(two)), 1e-4);
}

TEST(MultiGpu, AKilledRankIsNamedWithinTheTimeout) {
  REQUIRE_RANK_GPUS(2);
  const std::string exp = dp_experiment("gpu", "callbacks: [{plugin: die_at, iteration: 5, rank: 1}]\n");
  const auto t0 = std::chrono::steady_clock::now();
  // Without the launcher: rank 0 must find out (the per-step flags over Gloo fail) and name rank 1.
  auto results =
      launch_by_environment(exp + " --output-dir " + temp_dir("kill") + " --plugin-dir " + fixture_dir("components") +
                                " --set distributed.num_gpus=2" + " --set loop.batch_per_device=32",
                            2);
  EXPECT_EQ(results[1].exit_code, 128 + 9);
  EXPECT_EQ(results[0].exit_code, 1) << results[0].err;
  EXPECT_TRUE(contains(results[0].err, "another rank died, hung or could not be reached")) << results[0].err;
  EXPECT_TRUE(contains(results[0].err, "rank 1 stopped answering")) << results[0].err;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);  // timeout_secs 20
}

TEST(MultiGpu, InterruptedAndResumedOnTwoGpusIsBitIdentical) {
  REQUIRE_RANK_GPUS(2);
  expect_resume_bit_identical("--set distributed.num_gpus=2 --set loop.batch_per_device=32", 2);
}

TEST(MultiGpu, AResumedRankOneHoldsNothingOnGpuZero) {
  // Checkpoints are loaded onto each rank's own GPU: before, every tensor
  // went back to cuda:0, where rank 0 had saved it from.
  REQUIRE_TWO_PHYSICAL_GPUS("rank 1 must hold nothing on cuda:0, where rank 0 trains");
  const std::string out = temp_dir("rank1-mem"), with_fixtures = " --plugin-dir " + fixture_dir("components");
  const std::string args = "--set distributed.num_gpus=2 --set loop.batch_per_device=32" + with_fixtures;
  ASSERT_EQ(train(out, args, "callbacks: [{plugin: stop_at, iteration: 9}]\n").exit_code, 0);
  auto r = train(out, args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string log = rank_log(run_dir(out), 1);
  EXPECT_TRUE(contains(log, "trainyard: resuming from")) << log;
  EXPECT_TRUE(contains(log, "rank 1 peak GPU memory: cuda:1 ")) << log;
  EXPECT_FALSE(contains(log, "cuda:0 ")) << log;
}

TEST(MultiGpu, EachRankSeeingOnlyItsOwnGpuTrains) {
  // Slurm's --gpus-per-task=1 or a per-rank CUDA_VISIBLE_DEVICES: every rank
  // sees one GPU, as cuda:0, and must use it.
  REQUIRE_TWO_PHYSICAL_GPUS("rank 1 is started with CUDA_VISIBLE_DEVICES=1");
  const std::string out = temp_dir("own-gpu"), exp = dp_experiment("gpu");
  const int port = free_port();
  std::string script;
  for (int r = 0; r < 2; ++r)
    script += "(CUDA_VISIBLE_DEVICES=" + std::to_string(r) + " RANK=" + std::to_string(r) +
              " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(r) +
              " LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " +
              trainyard_binary() + " run " + exp + " --output-dir " + out +
              " --set distributed.num_gpus=2 --set loop.batch_per_device=32 > " + out + "/out" + std::to_string(r) +
              " 2>&1; echo $? > " + out + "/rc" + std::to_string(r) + ") &\n";
  script += "wait\n";
  write_file(out + "/launch.sh", script);
  run_command("bash " + out + "/launch.sh");
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(read_file(out + "/rc" + std::to_string(r)), "0\n") << read_file(out + "/out" + std::to_string(r));
  EXPECT_TRUE(contains(rank_log(run_dir(out), 1), "rank 1 peak GPU memory: cuda:0 ")) << rank_log(run_dir(out), 1);
}

TEST(MultiGpu, SyncBatchNormInReducedPrecisionWithLargePerRankCountsStaysNearFp32) {
  // 32 samples of 64x64 per rank: 131,072 values per channel, past float16's
  // 65,504, where counting in the input's dtype made every layer NaN.
  REQUIRE_RANK_GPUS(2);
  const std::string exp = convnet_experiment("sbn", 8, 64);
  const std::string common =
      " --set distributed.num_gpus=2 --set loop.batch_per_device=32 --set distributed.sync_batch_norm=true";
  std::map<std::string, double> loss;
  for (const std::string precision : {"fp32", "fp16-mixed", "bf16-mixed"}) {
    const std::string out = temp_dir("sbn-" + precision);
    auto r = trainyard_with_env(kDeterministic,
                                "run " + exp + " --output-dir " + out + common + " --set loop.precision=" + precision);
    if (precision == "bf16-mixed" && r.exit_code == 2) continue;  // before compute capability 8.0
    ASSERT_EQ(r.exit_code, 0) << precision << ": " << r.err;
    loss[precision] = series(run_dir(out) + "/metrics.jsonl", "test_loss").back();
    EXPECT_TRUE(std::isfinite(loss[precision])) << precision;
    metric("2 GPUs sync BN " + precision, run_dir(out));
  }
  for (const auto& [precision, l] : loss)
    EXPECT_NEAR(l, loss["fp32"], 0.05 * std::max(loss["fp32"], 0.05)) << precision;
}

TEST(MultiGpu, BuffersAreRankZerosSoTheReportedTestIsTheSavedModel) {
  REQUIRE_RANK_GPUS(2);
  const std::string exp = convnet_experiment("bnb", 4, 8), out = temp_dir("bnb");
  auto r = trainyard_with_env(kDeterministic, "run " + exp + " --output-dir " + out +
                                                  " --set distributed.num_gpus=2 --set loop.batch_per_device=32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto e = trainyard_with_env(kDeterministic, "eval " + exp + " --output-dir " + out +
                                                  " --set distributed.num_gpus=1 --output " + out + "/eval.json");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const double ran = json_of(run_dir(out) + "/summary.json")["metrics"]["test_loss"],
               saved = json_of(out + "/eval.json")["values"]["test_loss"];
  EXPECT_NEAR(ran, saved, 1e-5 * std::max(1.0, saved));
}

}  // namespace
}  // namespace trainyard::test
