#pragma once
// Moving batches from the decode threads to a GPU without stalling it.
#include <functional>
#include <memory>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "trainyard/batch.h"
#include "trainyard/fields.h"

namespace trainyard::host {

/// For a CUDA device: the host batch (pinned by the decode threads) is copied
/// with non_blocking on a side stream, one batch ahead of its use, and the
/// compute stream waits on the copy's event before the batch is handed out.
/// The device tensors are marked as used on the compute stream so the caching
/// allocator does not reuse them while the step runs.
///
///   DeviceCopy copy(device);
///   copy.start(std::move(next_host_batch));    // returns at once
///   Batch ready = copy.take();                 // safe to use on the current stream
class DeviceCopy {
 public:
  explicit DeviceCopy(c10::Device device);
  ~DeviceCopy();
  /// True when batches for `device` go through this class (a CUDA device and
  /// a CUDA build); false means plain .to(device).
  static bool applies(c10::Device device);
  /// Starts copying `batch`; at most one copy is in flight.
  void start(Batch batch);
  bool pending() const;
  /// The started batch, on the device, ordered before work on the current stream.
  Batch take();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Pins a host batch's tensors (page-locked memory makes the copy
/// asynchronous); tensors already on a device stay as they are.
void pin(Batch& batch);
/// Pins a host batch's field values (not ragged counts: they stay on the CPU).
void pin(Fields& fields);

/// Runs `work` with a stream of LibTorch's pool current where `on` is a CUDA
/// tensor (elsewhere as it is): a decode thread that reads a batch already on
/// the device (the label check's min and max) then waits for that read only,
/// not for the training's steps queued on the default stream.
void off_the_training_stream(const at::Tensor& on, const std::function<void()>& work);

}  // namespace trainyard::host
