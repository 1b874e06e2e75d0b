#pragma once
// Which device a rank trains on, and where its collectives' tensors live.
#include <string>

#include <c10/core/Device.h>

#include "distributed/world.h"

namespace trainyard::host {

/// This rank's training device: cuda:(distributed.first_gpu_id + local rank)
/// when the experiment trains on GPUs, else the CPU. Throws ConfigError when
/// LibTorch has no CUDA or the index is past the GPUs this process sees.
c10::Device rank_device(const Experiment& e, const World& world);

/// Where a collective's tensors must live: NCCL takes only tensors on the
/// rank's own GPU, Gloo takes CPU tensors. The Communicator builds every flag,
/// sum and barrier tensor here, and the NCCL path asks the same function.
c10::Device collective_device(c10::Device rank_device);

/// True when the collectives of a rank on `rank_device` go through NCCL.
inline bool uses_nccl(c10::Device rank_device) { return rank_device.is_cuda(); }

/// Makes a CUDA device current for this thread (and later CUDA calls that
/// name no device); a no-op for the CPU. Call before creating NCCL's group.
void make_current(c10::Device device);

/// "CUDA 13.2 (runtime 13020), cuDNN 91600, 2 GPUs" or "not compiled in".
std::string cuda_summary();

}  // namespace trainyard::host
