#pragma once
// A CUDA stream that belongs to one user. LibTorch's pool lends 32 streams
// per device round robin (c10::cuda::getStreamFromPool), to whoever asks:
// with enough decode threads (nvJPEG's slots take pool streams too) a pool
// stream would be shared with the captured step or the batch copies, whose
// work would then wait on a decode. The loop's own streams are made here.
#include <c10/core/Device.h>

#ifdef TRAINYARD_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

namespace trainyard::host {

/// A new non-blocking stream on `device` (a CUDA device), shared with no one.
/// It lives as long as the process: a run makes a few (one per stage for the
/// captured step and one for the batch copies), and no tensor's cached block
/// is ever left on a destroyed stream.
c10::cuda::CUDAStream dedicated_stream(c10::Device device);

}  // namespace trainyard::host
#endif
