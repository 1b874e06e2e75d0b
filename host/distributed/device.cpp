#include "distributed/device.h"

#include <string>
#include <vector>

#include <torch/cuda.h>

#include "trainyard/error.h"
#include "trainyard/version.h"

#ifdef TRAINYARD_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace trainyard::host {

c10::Device rank_device(const Experiment& e, const World& world) {
  if (e.distributed.num_gpus <= 0) return c10::Device(c10::DeviceType::CPU);
  const std::string where = e.where("distributed.num_gpus");
  const int64_t visible = torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  if (visible == 0)
    throw ConfigError(where + ": GPUs requested but " +
                          (std::string(TRAINYARD_CUDA) == "none" ? "this LibTorch has no CUDA"
                                                                  : "this process sees no CUDA device"),
                      "expected num_gpus: 0 on this machine, got " + std::to_string(e.distributed.num_gpus),
                      "set distributed.num_gpus: 0 to train on the CPU");
  const int64_t index = e.distributed.first_gpu_id + world.local_rank;
  if (index >= visible)
    throw ConfigError(e.where("distributed.first_gpu_id") +
                          ": local rank " + std::to_string(world.local_rank) +
                          " would use GPU " + std::to_string(index),
                      "expected first_gpu_id + local rank < " + std::to_string(visible) + " (the GPUs visible here)",
                      "start at most " + std::to_string(visible - e.distributed.first_gpu_id) +
                          " processes per node, or check CUDA_VISIBLE_DEVICES");
#ifdef TRAINYARD_WITH_CUDA
  // bfloat16 arithmetic needs compute capability 8.0 (Ampere) or newer.
  const cudaDeviceProp* props = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
  std::vector<const Experiment*> all{&e};
  for (const auto& stage : e.stages) all.push_back(&stage);
  for (const Experiment* x : all)
    if (x->loop.precision == "bf16-mixed" && props->major < 8)
      throw ConfigError(e.where("loop.precision") +
                            ": bf16-mixed needs a GPU of compute capability 8.0 or newer (native bfloat16)",
                        "expected fp32 or fp16-mixed on GPU " + std::to_string(index) + " (" + props->name + ", " +
                            std::to_string(props->major) + "." + std::to_string(props->minor) + "), got bf16-mixed",
                        "use precision: fp16-mixed on this GPU");
#endif
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index));
}

c10::Device collective_device(c10::Device rank_device) {
  return uses_nccl(rank_device) ? rank_device : c10::Device(c10::DeviceType::CPU);
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
  std::string s = std::string("CUDA ") + TRAINYARD_CUDA + ", NCCL " + (std::string(TRAINYARD_NCCL) == "1" ? "in" : "not in");
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

}  // namespace trainyard::host
