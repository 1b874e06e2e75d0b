#include "util/cuda_stream.h"

#ifdef TRAINYARD_WITH_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

namespace trainyard::host {

c10::cuda::CUDAStream dedicated_stream(c10::Device device) {
  c10::cuda::CUDAGuard guard(device);
  cudaStream_t stream = nullptr;
  C10_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return c10::cuda::getStreamFromExternal(stream, device.index());
}

}  // namespace trainyard::host
#endif
