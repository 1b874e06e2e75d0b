#include "data/device_copy.h"

#include <ATen/ATen.h>

#include "trainyard/error.h"

#ifdef TRAINYARD_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "util/cuda_stream.h"
#endif

namespace trainyard::host {

#ifdef TRAINYARD_WITH_CUDA
struct DeviceCopy::Impl {
  c10::Device device;
  c10::cuda::CUDAStream side;
  at::cuda::CUDAEvent copied;
  std::optional<Batch> in_flight;
  // A stream of its own: a pool stream could be a decode thread's too (nvJPEG's slots take them).
  explicit Impl(c10::Device d) : device(d), side(loop_stream(d, LoopStream::batch_copies)) {}
};

DeviceCopy::DeviceCopy(c10::Device device) : impl_(std::make_unique<Impl>(device)) {}

bool DeviceCopy::applies(c10::Device device) { return device.is_cuda(); }

void DeviceCopy::start(Batch batch) {
  c10::cuda::CUDAGuard device_guard(impl_->device);
  // The host batch was written by the CPU before this call; LibTorch's pinned
  // allocator keeps its block until the copy's stream is past it.
  {
    c10::cuda::CUDAStreamGuard stream_guard(impl_->side);
    batch.input = batch.input.to(impl_->device, /*non_blocking=*/true);
    batch.target = batch.target.to(impl_->device, /*non_blocking=*/true);
  }
  impl_->copied.record(impl_->side);
  impl_->in_flight = std::move(batch);
}

bool DeviceCopy::pending() const { return impl_->in_flight.has_value(); }

Batch DeviceCopy::take() {
  if (!impl_->in_flight) throw Error("DeviceCopy::take: no batch in flight");
  c10::cuda::CUDAGuard device_guard(impl_->device);
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(impl_->device.index());
  impl_->copied.block(compute);
  Batch batch = std::move(*impl_->in_flight);
  impl_->in_flight.reset();
  // Allocated on the side stream, used on the compute stream.
  batch.input.record_stream(compute.unwrap());
  batch.target.record_stream(compute.unwrap());
  return batch;
}

void pin(Batch& batch) {
  // A dataset that decodes on the GPU (image_datasets' decode: gpu) hands its inputs over there already.
  for (at::Tensor* t : {&batch.input, &batch.target})
    if (t->device().is_cpu() && !t->is_pinned()) *t = t->pin_memory();
}

void pin(Fields& fields) {
  for (auto& [name, field] : fields)
    if (field.values.device().is_cpu() && !field.values.is_pinned()) field.values = field.values.pin_memory();
}

void off_the_training_stream(const at::Tensor& on, const std::function<void()>& work) {
  if (!on.defined() || !on.is_cuda()) return work();
  c10::cuda::CUDAGuard device_guard(on.device());
  c10::cuda::CUDAStreamGuard stream_guard(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, on.device().index()));
  work();
}
#else
void off_the_training_stream(const at::Tensor&, const std::function<void()>& work) { work(); }
struct DeviceCopy::Impl {};
DeviceCopy::DeviceCopy(c10::Device device) {
  throw Error("DeviceCopy for " + device.str() + ": trainyard was built without CUDA");
}
bool DeviceCopy::applies(c10::Device) { return false; }
void DeviceCopy::start(Batch) {}
bool DeviceCopy::pending() const { return false; }
Batch DeviceCopy::take() { throw Error("DeviceCopy::take: built without CUDA"); }
void pin(Batch&) {}
void pin(Fields&) {}
#endif

DeviceCopy::~DeviceCopy() = default;

}  // namespace trainyard::host
