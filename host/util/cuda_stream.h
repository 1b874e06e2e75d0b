#pragma once
// Streams that belong to one user. LibTorch's pool lends 32 streams per
// device round robin (c10::cuda::getStreamFromPool) to whoever asks: with
// enough decode threads (nvJPEG's slots take pool streams too) a pool stream
// would be shared with the captured step or the batch copies, whose work
// would then wait on a decode. The loop's own streams are made here.
#include <c10/core/Device.h>

#ifdef TRAINYARD_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

namespace trainyard::host {

/// What a stream of the loop's own is for.
enum class LoopStream { batch_copies, captured_step };

/// The non-blocking stream for `use` on `device` (a CUDA device), shared with
/// no other use: made on first call, the same stream after (a loader
/// pipeline per epoch and test pass, a captured step per stage, one after
/// another), kept until the process ends.
c10::cuda::CUDAStream loop_stream(c10::Device device, LoopStream use);

}  // namespace trainyard::host
#endif
