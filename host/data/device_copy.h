#pragma once
// Moving batches from the decode threads to a GPU without stalling it.
#include <memory>
#include <optional>

#include <c10/core/Device.h>

#include "trainyard/batch.h"

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

}  // namespace trainyard::host
