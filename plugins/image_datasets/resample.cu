// The GPU path's crop, resize and flip for a whole batch in one launch: one
// thread per output pixel (all 3 channels), blockIdx.z the image. The
// arithmetic is resample.h's, which the CPU tests run too.
#include "resample_launch.h"

#include <cuda_runtime.h>

#include "resample.h"

namespace image_datasets {
namespace {

__global__ void resample_batch(const ResampleJob* jobs, int out_width, int out_height) {
  const int ox = blockIdx.x * blockDim.x + threadIdx.x;
  const int oy = blockIdx.y * blockDim.y + threadIdx.y;
  if (ox >= out_width || oy >= out_height) return;
  resample_pixel(jobs[blockIdx.z], out_width, out_height, ox, oy);
}

}  // namespace

const char* launch_resample(const ResampleJob* device_jobs, int count, int out_width, int out_height,
                            void* stream) {
  if (count <= 0) return nullptr;
  const dim3 block(32, 8);
  const dim3 grid((out_width + block.x - 1) / block.x, (out_height + block.y - 1) / block.y,
                  static_cast<unsigned>(count));
  resample_batch<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(device_jobs, out_width, out_height);
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? nullptr : cudaGetErrorString(error);
}

}  // namespace image_datasets
