#include "util/cuda_stream.h"

#ifdef TRAINYARD_WITH_CUDA
#include <map>
#include <mutex>
#include <utility>

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

namespace trainyard::host {

c10::cuda::CUDAStream loop_stream(c10::Device device, LoopStream use) {
  static std::mutex mutex;
  static std::map<std::pair<c10::DeviceIndex, LoopStream>, cudaStream_t> made;
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  std::lock_guard<std::mutex> lock(mutex);
  cudaStream_t& stream = made[{index, use}];
  if (!stream) {
    c10::cuda::CUDAGuard guard(index);
    C10_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  return c10::cuda::getStreamFromExternal(stream, index);
}

}  // namespace trainyard::host
#endif
