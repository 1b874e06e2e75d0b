#pragma once
// The one entry point into resample.cu (compiled by nvcc, without LibTorch's
// headers): a batch's crops resampled on a CUDA stream.
#include "resample.h"

namespace image_datasets {

/// Launches resample_pixel for every output pixel of `count` jobs on
/// `stream` (a cudaStream_t). `device_jobs` is in device memory, and so are
/// their sources and outputs. Returns nullptr, or the CUDA error's text.
const char* launch_resample(const ResampleJob* device_jobs, int count, int out_width, int out_height, void* stream);

}  // namespace image_datasets
