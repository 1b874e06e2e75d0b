#pragma once
// Which device a rank trains on, and where its collectives' tensors live.
#include <optional>
#include <string>

#include <c10/core/Device.h>

#include "distributed/world.h"

namespace trainyard::host {

/// Where a collective's tensors must live: the rank's own GPU when it trains
/// on one (NCCL takes nothing else; under ranks_share_gpu_for_tests(), Gloo
/// stages them through host memory), else the CPU. The Communicator builds
/// its gather and broadcast tensors here, and the GPU paths ask the same function.
c10::Device collective_device(c10::Device rank_device);

/// The test setting TRAINYARD_TEST_SHARED_GPU: "1" lets several ranks share
/// one GPU, their collectives over Gloo with CUDA tensors (staged through
/// pinned host memory: slow) instead of NCCL, which refuses two ranks on one
/// device; the one-GPU-per-rank check is skipped. For the MultiGpu tests on a
/// machine with one GPU (docs/distributed.md), never for real runs. Unset,
/// empty or "0": off. Anything else throws ConfigError naming the variable.
/// Read at each call (the environment does not change during a run).
bool ranks_share_gpu_for_tests();

/// True when the collectives of a rank on `rank_device` go through NCCL: a
/// GPU rank, unless ranks_share_gpu_for_tests().
bool uses_nccl(c10::Device rank_device);

/// Makes a CUDA device current for this thread (and later CUDA calls that
/// name no device); a no-op for the CPU. Call before creating NCCL's group.
void make_current(c10::Device device);

/// "CUDA 13.2 (runtime 13020), cuDNN 91600, 2 GPUs" or "not compiled in".
std::string cuda_summary();

/// Peak memory the caching allocator gave this process on each GPU it used:
/// "cuda:1 812 MiB" (a rank that touched another rank's GPU shows it), or
/// empty when none was used (or no CUDA).
std::string gpu_memory_peaks();

/// What this machine's CPU offers reduced precision, as LibTorch answers it:
/// cpuinfo's ISA flags (at::cpu::get_cpu_capabilities), the level ATen's own
/// kernels dispatch to (at::get_cpu_capability, which ATEN_CPU_CAPABILITY can
/// lower), and oneDNN's cap when ONEDNN_MAX_CPU_ISA lowers it (LibTorch does
/// not export oneDNN's own query). bfloat16 is native only when the CPU has
/// AVX512-BF16 or AMX-BF16 and both kernel libraries may use it; otherwise
/// oneDNN and ATen emulate it, measured 6-16x slower than fp32 on convnets.
struct CpuFacts {
  std::string name;  ///< "AMD EPYC", "Intel(R) Xeon(R) Platinum 8480+"
  bool avx2 = false, avx512 = false, avx512_bf16 = false, amx_bf16 = false;
  std::string aten_kernels;    ///< "AVX512", "AVX2", "DEFAULT" (or the architecture's names)
  std::string onednn_max_isa;  ///< ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) as set; empty: not capped

  /// True when bf16 matrix and convolution kernels run natively here.
  bool native_bf16() const;
  /// Why not, in a few words ("no AVX512-BF16 or AMX-BF16 instructions"); empty when native.
  std::string no_native_bf16_reason() const;
  /// "AMD EPYC; AVX2 yes, AVX-512 yes, AVX512-BF16 yes, AMX-BF16 no; ATen kernels AVX512"
  std::string describe() const;
};

/// This process's CpuFacts (read once).
const CpuFacts& cpu_facts();

/// A GPU's name and compute capability, or nothing when LibTorch has no CUDA
/// or does not see GPU `index`.
struct GpuFacts {
  std::string name;
  std::string uuid;  ///< "GPU-8f2c..." as nvidia-smi -L prints it: one physical GPU, whatever index a process sees
  int major = 0, minor = 0;
};
std::optional<GpuFacts> gpu_facts(int64_t index);

/// The GPU a rank uses: first_gpu_id + local rank, or, when this process sees
/// exactly one GPU and that index is past it, that one GPU (each rank was
/// given its own: Slurm's --gpus-per-task=1, a per-rank CUDA_VISIBLE_DEVICES).
/// -1 when neither fits.
int64_t gpu_index_for(int64_t first_gpu_id, int64_t local_rank, int64_t visible);

}  // namespace trainyard::host
