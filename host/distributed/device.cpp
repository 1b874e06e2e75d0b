#include "distributed/device.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

#include <ATen/Version.h>
#include <ATen/cpu/Utils.h>
#include <torch/cuda.h>

#include "trainyard/error.h"
#include "trainyard/version.h"

#ifdef TRAINYARD_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace trainyard::host {

int64_t gpu_index_for(int64_t first_gpu_id, int64_t local_rank, int64_t visible) {
  const int64_t index = first_gpu_id + local_rank;
  if (index < visible) return index;
  // One GPU visible to each rank: the launcher gave every rank its own.
  if (visible == 1 && first_gpu_id == 0) return 0;
  return -1;
}

bool ranks_share_gpu_for_tests() {
  const char* value = std::getenv("TRAINYARD_TEST_SHARED_GPU");
  if (!value || !*value || std::string(value) == "0") return false;
  if (std::string(value) == "1") return true;
  throw ConfigError("environment: TRAINYARD_TEST_SHARED_GPU='" + std::string(value) + "' is not a setting",
                    "expected 1 (ranks share one GPU over Gloo: a test setting) or 0 (or unset)",
                    "unset it; it is for the MultiGpu tests on a machine with one GPU, never for real runs");
}

bool uses_nccl(c10::Device rank_device) { return rank_device.is_cuda() && !ranks_share_gpu_for_tests(); }

c10::Device collective_device(c10::Device rank_device) {
  return rank_device.is_cuda() ? rank_device : c10::Device(c10::DeviceType::CPU);
}

void make_current(c10::Device device) {
  if (!device.is_cuda()) return;
#ifdef TRAINYARD_WITH_CUDA
  c10::cuda::set_device(device.index());
#else
  throw Error("CUDA device " + device.str() + " requested but trainyard was built without CUDA");
#endif
}

std::string cuda_summary() {
#ifdef TRAINYARD_WITH_CUDA
  std::string s =
      std::string("CUDA ") + TRAINYARD_CUDA + ", NCCL " + (std::string(TRAINYARD_NCCL) == "1" ? "in" : "not in");
  const auto& hooks = at::detail::getCUDAHooks();
  if (hooks.hasCUDA()) {
    s += ", runtime " + std::to_string(hooks.versionCUDART()) + ", cuDNN " + std::to_string(hooks.versionCuDNN());
  }
  const int64_t n = torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  return s + ", " + std::to_string(n) + (n == 1 ? " GPU" : " GPUs") + " visible";
#else
  return "CUDA not compiled in";
#endif
}

namespace {

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
  return text;
}

// oneDNN's ISA levels below the first with bfloat16 dot products (AVX512_CORE_BF16).
bool caps_below_bf16(const std::string& isa) {
  for (const char* below : {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"})
    if (isa == below) return true;
  return false;
}

}  // namespace

bool CpuFacts::native_bf16() const { return no_native_bf16_reason().empty(); }

std::string CpuFacts::no_native_bf16_reason() const {
  if (!avx512_bf16 && !amx_bf16) return "no AVX512-BF16 or AMX-BF16 instructions";
  if (caps_below_bf16(onednn_max_isa)) return "oneDNN held at " + onednn_max_isa + " by ONEDNN_MAX_CPU_ISA";
  if (aten_kernels != "AVX512" && aten_kernels.rfind("AVX512", 0) != 0)
    return "ATen's kernels held at " + aten_kernels + " (ATEN_CPU_CAPABILITY)";
  return "";
}

std::string CpuFacts::describe() const {
  auto yes = [](bool b) { return b ? "yes" : "no"; };
  std::string s = (name.empty() ? "unknown CPU" : name) + "; AVX2 " + yes(avx2) + ", AVX-512 " + yes(avx512) +
                  ", AVX512-BF16 " + yes(avx512_bf16) + ", AMX-BF16 " + yes(amx_bf16) + "; ATen kernels " +
                  aten_kernels;
  if (!onednn_max_isa.empty()) s += ", oneDNN held at " + onednn_max_isa;
  return s + "; bf16 " + (native_bf16() ? "native" : "emulated (" + no_native_bf16_reason() + ")");
}

const CpuFacts& cpu_facts() {
  static const CpuFacts facts = [] {
    CpuFacts f;
    const auto capabilities = at::cpu::get_cpu_capabilities();  // cpuinfo's answers
    auto flag = [&](const char* key) {
      auto it = capabilities.find(key);
      return it != capabilities.end() && it->second.isBool() && it->second.toBool();
    };
    f.avx2 = flag("avx2");
    f.avx512 = flag("avx512_f");
    f.avx512_bf16 = flag("avx512_bf16");
    f.amx_bf16 = flag("amx_bf16");
    if (auto it = capabilities.find("cpu_name"); it != capabilities.end() && it->second.isString())
      f.name = it->second.toStringRef();
    f.aten_kernels = at::get_cpu_capability();
    for (const char* variable : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
      if (const char* isa = std::getenv(variable); isa && *isa && f.onednn_max_isa.empty())
        f.onednn_max_isa = upper(isa);
    if (f.onednn_max_isa == "ALL" || f.onednn_max_isa == "DEFAULT") f.onednn_max_isa.clear();
    return f;
  }();
  return facts;
}

std::string gpu_memory_peaks() {
  std::string out;
#ifdef TRAINYARD_WITH_CUDA
  if (!torch::cuda::is_available()) return out;
  const int64_t n = static_cast<int64_t>(torch::cuda::device_count());
  for (int64_t d = 0; d < n; ++d) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(d));
    const int64_t peak = stats.reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
    if (peak > 0)
      out += (out.empty() ? "" : ", ") + std::string("cuda:") + std::to_string(d) + " " +
             std::to_string((peak + (1 << 20) - 1) >> 20) + " MiB";
  }
#endif
  return out;
}

std::optional<GpuFacts> gpu_facts(int64_t index) {
#ifdef TRAINYARD_WITH_CUDA
  if (!torch::cuda::is_available() || index < 0 || index >= static_cast<int64_t>(torch::cuda::device_count()))
    return std::nullopt;
  const cudaDeviceProp* props = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
  // nvidia-smi's form: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
  std::string uuid = "GPU-";
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) uuid += '-';
    const auto byte = static_cast<unsigned char>(props->uuid.bytes[i]);
    uuid += hex[byte >> 4];
    uuid += hex[byte & 15];
  }
  return GpuFacts{props->name, uuid, props->major, props->minor};
#else
  (void)index;
  return std::nullopt;
#endif
}

}  // namespace trainyard::host
