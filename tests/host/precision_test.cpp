// loop.precision (autocast, loss scaling), network.memory_format, and where
// collective tensors live.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include <torch/cuda.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/input-archive.h>
#include <nlohmann/json.hpp>

#include "config/experiment.h"
#include "data/loader.h"
#include "distributed/communicator.h"
#include "distributed/device.h"
#include "support/data_parallel.h"
#include "train/checkpoint.h"
#include "train/components.h"
#include "train/epoch_loop.h"
#include "train/loader_settings.h"
#include "train/precision.h"
#include "trainyard/error.h"
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

std::vector<double> test_losses(const std::string& run_dir) {
  return test::series(run_dir + "/metrics.jsonl", "test_loss");
}

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
  EXPECT_LT(bf16.back(), bf16.front());                              // it learns
  EXPECT_NE(bf16.back(), fp32.back());                               // in another precision
  EXPECT_NEAR(bf16.back(), fp32.back(), 0.15 * fp32.back() + 0.02);  // to about the same place
}

TEST(Precision, Fp16LossScalingRunsInTheLoopAndItsStateIsCheckpointed) {
  // Users are refused fp16-mixed on the CPU (it is slow there), but CPU
  // autocast does run float16: set past validation, it drives the trainer's
  // scaler path for real. 16 updates: no growth, so every change of the
  // scale is a skipped overflow.
  const std::string path = test::temp_dir("exp-fp16run") + "/fp16run.yaml", out = test::temp_dir("out-fp16run");
  test::write_file(path, test::synthetic_experiment("fp16run"));
  Experiment e =
      validate_experiment(read_experiment(path, {"loop.epochs=1", "optimizer.lr=0.001"}), test::builtin_registry());
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
  EpochLoop trainer(e, std::move(c), context, RunPaths(out));
  trainer.run();
  const double scale = trainer.values().at("loss_scale");
  const double skipped =
      trainer.values().count("scaler_skipped_updates") ? trainer.values().at("scaler_skipped_updates") : 0;
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
  // metrics.jsonl holds the scale and the skipped updates as series (the
  // GPU suite reads them so), ending where the trainer ended.
  const auto scales = test::series(out + "/metrics.jsonl", "loss_scale");
  ASSERT_FALSE(scales.empty());
  EXPECT_EQ(scales.back(), scale);
  EXPECT_EQ(test::series(out + "/metrics.jsonl", "scaler_skipped_updates").back(), skipped);
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
  EXPECT_TRUE(test::contains(err, "error: --set loop.precision=fp16-mixed: loop.precision: fp16-mixed needs a GPU"))
      << err;
  EXPECT_TRUE(test::contains(err, "use precision: bf16-mixed on the CPU")) << err;
}

TEST(Precision, AnUnknownPrecisionListsTheChoices) {
  const std::string err = validate_error("loop.precision=bf16");
  EXPECT_TRUE(test::contains(err, "expected one of fp32, bf16-mixed, fp16-mixed, auto, got 'bf16'")) << err;
}

// The CPU kinds auto must tell apart, as LibTorch would answer for each.
CpuFacts cpu_kind(const std::string& kind) {
  CpuFacts f;
  f.avx2 = true;
  f.aten_kernels = "AVX2";
  if (kind == "avx2") f.name = "AMD EPYC 7B12";  // Zen 2: no AVX-512 at all
  if (kind == "avx512") f.name = "Intel Xeon Platinum 8259CL", f.avx512 = true, f.aten_kernels = "AVX512";
  if (kind == "avx512_bf16") f.name = "AMD EPYC 9R14", f.avx512 = f.avx512_bf16 = true, f.aten_kernels = "AVX512";
  if (kind == "amx")
    f.name = "Intel Xeon Platinum 8480+", f.avx512 = f.avx512_bf16 = f.amx_bf16 = true, f.aten_kernels = "AVX512";
  return f;
}

TEST(Precision, AutoIsFp32WhereTheCpuWouldEmulateBf16AndBf16WhereItIsNative) {
  for (const char* kind : {"avx2", "avx512"}) {
    const PrecisionChoice c = choose_precision("auto", cpu_kind(kind), false, std::nullopt);
    EXPECT_EQ(c.precision, "fp32") << kind;
    EXPECT_EQ(c.reason, "auto: bfloat16 would be emulated on this CPU (no AVX512-BF16 or AMX-BF16 instructions)")
        << kind;
    EXPECT_EQ(c.warning, "");
  }
  for (const char* kind : {"avx512_bf16", "amx"}) {
    const PrecisionChoice c = choose_precision("auto", cpu_kind(kind), false, std::nullopt);
    EXPECT_EQ(c.precision, "bf16-mixed") << kind;
    EXPECT_TRUE(test::contains(c.reason, "computes in bfloat16 natively")) << c.reason;
  }
  // The kernel libraries held below bf16 emulate it, whatever the CPU has.
  CpuFacts held = cpu_kind("amx");
  held.onednn_max_isa = "AVX512_CORE";
  EXPECT_EQ(choose_precision("auto", held, false, std::nullopt).precision, "fp32");
  EXPECT_TRUE(test::contains(held.no_native_bf16_reason(), "oneDNN held at AVX512_CORE by ONEDNN_MAX_CPU_ISA"));
  held = cpu_kind("avx512_bf16");
  held.aten_kernels = "AVX2";
  EXPECT_EQ(choose_precision("auto", held, false, std::nullopt).precision, "fp32");
  held.onednn_max_isa = "AVX512_CORE_BF16";  // allows bf16: only ATen's level holds it now
  EXPECT_TRUE(test::contains(held.no_native_bf16_reason(), "ATen's kernels held at AVX2"))
      << held.no_native_bf16_reason();
}

TEST(Precision, AutoOnGpusIsBf16FromComputeCapability8AndFp16WithLossScalingBefore) {
  const PrecisionChoice a100 =
      choose_precision("auto", cpu_kind("avx2"), true, GpuFacts{"NVIDIA A100-SXM4-80GB", "", 8, 0});
  EXPECT_EQ(a100.precision, "bf16-mixed");
  EXPECT_EQ(a100.reason, "auto: NVIDIA A100-SXM4-80GB, compute capability 8.0 computes in bfloat16 natively");
  const PrecisionChoice t4 = choose_precision("auto", cpu_kind("amx"), true, GpuFacts{"Tesla T4", "", 7, 5});
  EXPECT_EQ(t4.precision, "fp16-mixed");
  EXPECT_EQ(autocast_dtype(t4.precision), at::kHalf);  // the loss scaler turns on with it
  // A written precision on a GPU is kept (rank_device refuses bf16 before 8.0).
  EXPECT_EQ(choose_precision("fp32", cpu_kind("amx"), true, GpuFacts{"Tesla T4", "", 7, 5}).precision, "fp32");
}

TEST(Precision, ExplicitBf16OnACpuThatEmulatesItTrainsWithAWarning) {
  const PrecisionChoice c = choose_precision("bf16-mixed", cpu_kind("avx2"), false, std::nullopt);
  EXPECT_EQ(c.precision, "bf16-mixed");
  EXPECT_EQ(
      c.warning,
      "loop.precision: bf16-mixed is emulated on this CPU (AMD EPYC 7B12: no AVX512-BF16 or AMX-BF16 instructions): "
      "convnets measured 6-16x slower than fp32 on such CPUs; use loop.precision: auto (fp32 here) or fp32");
  EXPECT_EQ(choose_precision("bf16-mixed", cpu_kind("amx"), false, std::nullopt).warning, "");
  EXPECT_EQ(choose_precision("fp32", cpu_kind("avx2"), false, std::nullopt).warning, "");
}

TEST(Precision, ThisMachinesCpuFactsComeFromLibTorch) {
  const CpuFacts& f = cpu_facts();
  EXPECT_FALSE(f.aten_kernels.empty());
  EXPECT_EQ(f.native_bf16(), (f.avx512_bf16 || f.amx_bf16) && f.aten_kernels == "AVX512" && f.onednn_max_isa.empty())
      << f.describe();
  std::printf("this CPU: %s\n", f.describe().c_str());
}

// What the real binary says and records, with the kernels held at AVX2 the
// way a user would (ONEDNN_MAX_CPU_ISA, ATEN_CPU_CAPABILITY): bf16 is then
// emulated on any CPU, as on an AVX2-only machine.
const std::string kAvx2Kernels = "ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2";

// Why bf16 is emulated under kAvx2Kernels: the cap on a CPU that has the
// instructions, their absence on one that has not (development machines are
// of both kinds).
std::string emulated_reason() {
  const CpuFacts& cpu = cpu_facts();
  return cpu.avx512_bf16 || cpu.amx_bf16 ? "oneDNN held at AVX2 by ONEDNN_MAX_CPU_ISA"
                                         : "no AVX512-BF16 or AMX-BF16 instructions";
}

TEST(Precision, AutoResolvesAtValidateAndRunAndIsRecordedInConfigJsonAndProvenance) {
  const std::string exp = test::temp_dir("exp-auto") + "/auto.yaml", out = test::temp_dir("out-auto");
  test::write_file(exp, test::synthetic_experiment("auto"));
  const std::string sets = " --set loop.precision=auto --set loop.epochs=1";
  auto v = test::trainyard_with_env(kAvx2Kernels, "validate " + exp + sets);
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_TRUE(
      test::contains(v.out, "trainyard: loop.precision auto: fp32 (auto: bfloat16 would be emulated on this CPU (" +
                                emulated_reason() + "))"))
      << v.out;
  EXPECT_FALSE(test::contains(v.err, "warning")) << v.err;
  auto r = test::trainyard_with_env(kAvx2Kernels, "run " + exp + sets + " --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "trainyard: loop.precision auto: fp32")) << r.out;
  const auto config = nlohmann::json::parse(test::read_file(out + "/auto/config.json"));
  EXPECT_EQ(config["loop"]["precision"], "auto");  // as written: the experiment stays portable
  EXPECT_EQ(config["resolved_precision"]["precision"], "fp32");
  const auto provenance = nlohmann::json::parse(test::read_file(out + "/auto/provenance.json"));
  EXPECT_EQ(provenance["precision"]["requested"], "auto");
  EXPECT_EQ(provenance["precision"]["used"], "fp32");
  EXPECT_TRUE(test::contains(provenance["cpu"].get<std::string>(), "bf16 emulated")) << provenance["cpu"];
  // cuDNN's autotuner: auto, and on a CPU run never used, with the reason.
  EXPECT_EQ(provenance["cudnn_benchmark"]["requested"], "auto");
  EXPECT_EQ(provenance["cudnn_benchmark"]["used"], false);
  EXPECT_EQ(provenance["cudnn_benchmark"]["reason"], "not a CUDA run: cuDNN is not used");

  // Resumed where bf16 is native (here, when this CPU has it): allowed, and said.
  if (!cpu_facts().native_bf16()) return;
  r = test::trainyard("run " + exp + " --output-dir " + out + " --set loop.precision=auto --set loop.epochs=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "was trained in fp32; this machine resumes in bf16-mixed")) << r.out;
  EXPECT_TRUE(test::contains(r.out, "resuming from ")) << r.out;
  EXPECT_EQ(nlohmann::json::parse(test::read_file(out + "/auto/config.json"))["resolved_precision"]["precision"],
            "bf16-mixed");
}

TEST(Precision, ExplicitBf16WhereItIsEmulatedWarnsOnceAtValidateAndAtRunStart) {
  const std::string exp = test::temp_dir("exp-emulated") + "/emulated.yaml", out = test::temp_dir("out-emulated");
  test::write_file(exp, test::synthetic_experiment("emulated"));
  const std::string sets = " --set loop.precision=bf16-mixed --set loop.epochs=1";
  const std::string warning = "warning: loop.precision: bf16-mixed is emulated on this CPU (";
  auto v = test::trainyard_with_env(kAvx2Kernels, "validate " + exp + sets);
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(test::occurrences(v.err, warning), 1) << v.err;
  EXPECT_TRUE(test::contains(v.err, emulated_reason() +
                                        "): convnets measured 6-16x slower than "
                                        "fp32 on such CPUs; use loop.precision: auto (fp32 here) or fp32"))
      << v.err;
  auto r = test::trainyard_with_env(kAvx2Kernels, "run " + exp + sets + " --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;  // it trains: the user asked for it
  EXPECT_EQ(test::occurrences(r.err, warning), 1) << r.err;
}

TEST(Precision, VersionSaysWhetherThisCpuHasNativeBf16AndWhichKernelsAtenUses) {
  auto r = test::trainyard("--version");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "cpu: ")) << r.out;
  EXPECT_TRUE(test::contains(r.out, "AMX-BF16 ")) << r.out;
  EXPECT_TRUE(test::contains(r.out, "; ATen kernels " + cpu_facts().aten_kernels)) << r.out;
  EXPECT_TRUE(test::contains(r.out, cpu_facts().native_bf16() ? "bf16 native" : "bf16 emulated")) << r.out;
  auto held = test::trainyard_with_env(kAvx2Kernels, "--version");
  EXPECT_TRUE(test::contains(held.out, "ATen kernels AVX2, oneDNN held at AVX2; bf16 emulated")) << held.out;
}

TEST(Device, ACheckpointWrittenOnAGpuLoadsOntoTheDeviceThisProcessTrainsOn) {
  // A GPU rank's checkpoint says its tensors live on cuda:0. Unmapped,
  // LibTorch would put every tensor there (rank 1's parameters on rank 0's
  // GPU; no load at all on a machine without one, as here). Mapped to the
  // network's device, it loads here exactly as the CPU file does.
  const std::string path = test::temp_dir("exp-relocated") + "/relocated.yaml", out = test::temp_dir("out-relocated");
  test::write_file(path, test::synthetic_experiment("relocated"));
  Experiment e = validate_experiment(read_experiment(path, {"loop.epochs=1"}), test::builtin_registry());
  Context context;
  context.seed = e.seed;
  torch::manual_seed(e.seed);
  EpochLoop trainer(e, build_components(e, context), context, RunPaths(out));
  trainer.run();
  const std::string written = test::latest_checkpoint(out), relocated = out + "/from-gpu.pt";
  auto moved = test::run_command(::trainyard::test::python() + " " + test::source_dir() +
                                 "/tests/support/relocate_checkpoint.py " + written + " " + relocated + " cuda:0");
  ASSERT_EQ(moved.exit_code, 0) << moved.err;
  if (!torch::cuda::is_available()) {  // the premise: the file really names a GPU
    torch::serialize::InputArchive unmapped;
    EXPECT_THROW(unmapped.load_from(relocated), c10::Error);
  }
  torch::manual_seed(e.seed + 1);  // other weights, which the load must replace
  EpochLoop fresh(e, build_components(e, context), context, RunPaths(out));
  CheckpointState state = load_checkpoint(relocated, fresh.network(), fresh.optimizer(),
                                          Verify::already_done);  // its manifest describes the CPU file
  EXPECT_EQ(state.at.iteration, trainer.iteration());
  auto a = trainer.network().named_parameters(), b = fresh.network().named_parameters();
  for (const auto& p : b) {
    EXPECT_EQ(p.value().device(), c10::Device(c10::DeviceType::CPU)) << p.key();
    EXPECT_TRUE(at::equal(p.value(), a[p.key()])) << p.key();
  }
  for (const auto& group : fresh.optimizer().param_groups())  // momentum buffers too
    for (const auto& p : group.params()) {
      auto found = fresh.optimizer().state().find(p.unsafeGetTensorImpl());
      ASSERT_NE(found, fresh.optimizer().state().end());
      EXPECT_TRUE(static_cast<torch::optim::SGDParamState&>(*found->second).momentum_buffer().device().is_cpu());
    }
}

TEST(Device, EachRankSeeingOneGpuUsesItAndOtherwiseTheIndexMustExist) {
  EXPECT_EQ(gpu_index_for(0, 1, 4), 1);
  EXPECT_EQ(gpu_index_for(2, 1, 4), 3);
  EXPECT_EQ(gpu_index_for(0, 3, 1), 0);   // --gpus-per-task=1: every rank sees its own as cuda:0
  EXPECT_EQ(gpu_index_for(0, 2, 2), -1);  // two GPUs seen, a third rank: refused
  EXPECT_EQ(gpu_index_for(1, 0, 1), -1);  // first_gpu_id past the only GPU
}

TEST(Device, TheSharedGpuTestSettingIsOneOrOffKeepsTensorsOnTheGpuAndRefusesAnythingElse) {
  // TRAINYARD_TEST_SHARED_GPU (docs/distributed.md): "1" puts a GPU rank's
  // collectives on Gloo, their tensors still on its GPU; a CPU rank never reads it.
  const char* before = std::getenv("TRAINYARD_TEST_SHARED_GPU");
  const std::string saved = before ? before : "";
  const c10::Device gpu(c10::DeviceType::CUDA, 0), cpu(c10::DeviceType::CPU);
  ::unsetenv("TRAINYARD_TEST_SHARED_GPU");
  EXPECT_FALSE(ranks_share_gpu_for_tests());
  EXPECT_TRUE(uses_nccl(gpu));
  EXPECT_EQ(collective_device(gpu), gpu);
  EXPECT_EQ(collective_device(cpu), cpu);
  for (const char* off : {"", "0"}) {
    ::setenv("TRAINYARD_TEST_SHARED_GPU", off, 1);
    EXPECT_FALSE(ranks_share_gpu_for_tests()) << "'" << off << "'";
    EXPECT_TRUE(uses_nccl(gpu)) << "'" << off << "'";
  }
  ::setenv("TRAINYARD_TEST_SHARED_GPU", "1", 1);
  EXPECT_TRUE(ranks_share_gpu_for_tests());
  EXPECT_FALSE(uses_nccl(gpu));
  EXPECT_FALSE(uses_nccl(cpu));
  EXPECT_EQ(collective_device(gpu), gpu);  // where NCCL would want them
  EXPECT_EQ(collective_device(cpu), cpu);
  for (const char* garbage : {"yes", "2", " 1", "true"}) {
    ::setenv("TRAINYARD_TEST_SHARED_GPU", garbage, 1);
    try {
      ranks_share_gpu_for_tests();
      ADD_FAILURE() << "'" << garbage << "' accepted";
    } catch (const ConfigError& e) {
      EXPECT_TRUE(test::contains(e.what(), "environment: TRAINYARD_TEST_SHARED_GPU='" + std::string(garbage) + "'"))
          << e.what();
      EXPECT_TRUE(test::contains(e.what(), "expected 1 (ranks share one GPU over Gloo: a test setting) or 0"))
          << e.what();
    }
    EXPECT_THROW(uses_nccl(gpu), ConfigError) << garbage;
    EXPECT_FALSE(uses_nccl(cpu)) << garbage;  // a CPU run never reads it
  }
  if (before)
    ::setenv("TRAINYARD_TEST_SHARED_GPU", saved.c_str(), 1);
  else
    ::unsetenv("TRAINYARD_TEST_SHARED_GPU");
}

TEST(MemoryFormat, ChannelsLastPutsWeightsAndInputsInNhwcEvenWithOneChannel) {
  // Fashion-MNIST has one channel: a [N, 1, H, W] tensor passes for channels-last
  // with its NCHW strides, and the convolutions then ran NCHW (found by the
  // precision benchmark: channels_last was 1.01x). The channel stride must be 1.
  Experiment e = validate_experiment(read_experiment(test::source_dir() + "/experiments/fashion_mnist_convnet.yaml",
                                                     {"network.memory_format=channels_last"}),
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
                                     make_loader_options(e.loop, e.seed, e.network, c.train_data, 4, context));
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
