// The GPU suite: run by scripts/test-gpu.sh on a machine with GPUs, never by
// ctest (CI has none). Gpu.* needs one GPU, MultiGpu.* two. Without GPUs each
// test skips, unless TRAINYARD_EXPECT_GPUS says how many there must be (the
// script sets it from nvidia-smi): then a LibTorch that sees fewer fails.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <torch/cuda.h>

#include "support/data_parallel.h"
#include "trainyard/version.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

int visible_gpus() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

// Skips (or fails, under scripts/test-gpu.sh) unless `needed` GPUs are visible.
#define REQUIRE_GPUS(needed)                                                                             \
  do {                                                                                                   \
    const char* expected = std::getenv("TRAINYARD_EXPECT_GPUS");                                         \
    if (visible_gpus() < (needed)) {                                                                     \
      if (expected && std::atoi(expected) >= (needed))                                                   \
        FAIL() << "nvidia-smi lists " << expected << " GPUs but LibTorch sees " << visible_gpus()        \
               << " (driver too old for CUDA " << TRAINYARD_CUDA << "? CUDA_VISIBLE_DEVICES?)";          \
      GTEST_SKIP() << "needs " << (needed) << " GPU(s), " << visible_gpus() << " visible";               \
    }                                                                                                    \
  } while (0)

// cuBLAS picks reduction orders per workspace: a fixed one makes runs repeatable.
const std::string kDeterministic = "CUBLAS_WORKSPACE_CONFIG=:4096:8 ";

std::string run_dir(const std::string& out) { return out + "/gpu"; }
std::string last(const std::string& out) { return run_dir(out) + "/checkpoints/" + kLastDpCheckpoint; }

CommandResult train(const std::string& out, const std::string& args, const std::string& more = "") {
  return trainyard_with_env(kDeterministic, "run " + dp_experiment("gpu", more) + " --output-dir " + out + " " + args);
}

// Stops at iteration 9, resumes, and compares with an uninterrupted run.
void expect_resume_bit_identical(const std::string& args, const std::string& resumed_line) {
  const std::string straight = temp_dir("straight"), split = temp_dir("split");
  const std::string with_fixtures = args + " --plugin-dir " + fixture_dir("components");
  ASSERT_EQ(train(straight, with_fixtures).exit_code, 0);
  ASSERT_EQ(train(split, with_fixtures, "callbacks: [{plugin: stop_at, iteration: 9}]\n").exit_code, 0);
  auto r = train(split, with_fixtures);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, resumed_line)) << r.out;
  EXPECT_EQ(compare_checkpoint_networks(last(straight), last(split)), "");
}

TEST(Gpu, SingleDeviceTrainingLearnsLikeTheCpu) {
  REQUIRE_GPUS(1);
  const std::string cpu = temp_dir("cpu"), gpu = temp_dir("gpu");
  ASSERT_EQ(train(cpu, "").exit_code, 0);
  auto r = train(gpu, "--set distributed.num_gpus=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto a = series(run_dir(cpu) + "/metrics.jsonl", "test_loss"), b = series(run_dir(gpu) + "/metrics.jsonl", "test_loss");
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
    if (precision == "fp16-mixed")  // the scaler's state is logged and checkpointed
      EXPECT_FALSE(series(run_dir(out) + "/metrics.jsonl", "loss_scale").empty());
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

TEST(Gpu, Fp16RunInterruptedAndResumedIsBitIdentical) {
  REQUIRE_GPUS(1);
  expect_resume_bit_identical("--set distributed.num_gpus=1 --set loop.precision=fp16-mixed", "resuming from");
}

TEST(MultiGpu, TwoRanksOverNcclEqualOneGpuWithTheSameGlobalBatch) {
  REQUIRE_GPUS(2);
  const std::string one = temp_dir("one"), two = temp_dir("two");
  ASSERT_EQ(train(one, "--set distributed.num_gpus=1").exit_code, 0);
  auto r = train(two, "--set distributed.num_gpus=2 --set loop.batch_per_device=32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "[rank 1] trainyard: rank 1 of 2")) << r.out;
  EXPECT_LT(max_checkpoint_difference(last(one), last(two)), 1e-4);
  EXPECT_EQ(series(run_dir(one) + "/metrics.jsonl", "test_accuracy_top1"),
            series(run_dir(two) + "/metrics.jsonl", "test_accuracy_top1"));
}

TEST(MultiGpu, SyncBatchNormOverNcclEqualsOneGpu) {
  REQUIRE_GPUS(2);
  const std::string net = "{plugin: convnet, channels: [4], dropout: 0.0, hidden: 0}";
  auto exp = [&](const std::string& name) {
    std::string yaml = read_file(dp_experiment(name));
    yaml.replace(0, yaml.find('\n'), "name: gpu");
    const std::string mlp = "{plugin: mlp, hidden_sizes: [32], dropout: 0.0}";
    yaml.replace(yaml.find(mlp), mlp.size(), net);
    for (int i = 0; i < 2; ++i) yaml.replace(yaml.find("shape: [1, 4, 4]"), 16, "shape: [1, 8, 8]");
    const std::string path = temp_dir("bn-" + name) + "/gpu.yaml";
    write_file(path, yaml);
    return path;
  };
  const std::string one = temp_dir("bn-one"), two = temp_dir("bn-two");
  ASSERT_EQ(trainyard_with_env(kDeterministic, "run " + exp("a") + " --output-dir " + one + " --set distributed.num_gpus=1")
                .exit_code, 0);
  auto r = trainyard_with_env(kDeterministic, "run " + exp("b") + " --output-dir " + two +
                                                  " --set distributed.num_gpus=2 --set loop.batch_per_device=32"
                                                  " --set distributed.sync_batch_norm=true");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(max_checkpoint_difference(last(one), last(two)), 1e-4);
}

TEST(MultiGpu, AKilledRankIsNamedWithinTheTimeout) {
  REQUIRE_GPUS(2);
  const std::string exp = dp_experiment("gpu", "callbacks: [{plugin: die_at, iteration: 5, rank: 1}]\n");
  const auto t0 = std::chrono::steady_clock::now();
  // Without the launcher: rank 0 must find out through NCCL (blocking wait) and name rank 1.
  auto results = launch_by_environment(exp + " --output-dir " + temp_dir("kill") + " --plugin-dir " +
                                           fixture_dir("components") + " --set distributed.num_gpus=2" +
                                           " --set loop.batch_per_device=32",
                                       2);
  EXPECT_EQ(results[1].exit_code, 128 + 9);
  EXPECT_EQ(results[0].exit_code, 1) << results[0].err;
  EXPECT_TRUE(contains(results[0].err, "another rank died, hung or could not be reached")) << results[0].err;
  EXPECT_TRUE(contains(results[0].err, "rank 1 stopped answering")) << results[0].err;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);  // timeout_secs 20
}

TEST(MultiGpu, InterruptedAndResumedOnTwoGpusIsBitIdentical) {
  REQUIRE_GPUS(2);
  expect_resume_bit_identical("--set distributed.num_gpus=2 --set loop.batch_per_device=32",
                              "[rank 1] trainyard: resuming from");
}

}  // namespace
}  // namespace trainyard::test
