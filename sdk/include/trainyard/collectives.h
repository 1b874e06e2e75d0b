#pragma once
/// Collectives a component may use in a multi-process run.
/// Context::collectives is null in a single-process run.
///
/// Every rank must make the same calls in the same order (the processes
/// match collectives by order), so only call them from code every rank runs
/// identically, such as a layer's forward and backward.
///
/// Example:
///   if (context.collectives) context.collectives->all_reduce_sum(local_sums);

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace trainyard {

class Collectives {
 public:
  virtual ~Collectives();
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Replaces `tensor` (on every rank) with its element-wise sum over ranks.
  /// A tensor on another device than device() is copied there and back.
  virtual void all_reduce_sum(at::Tensor& tensor) const = 0;
  /// Where the backend wants collective tensors: the rank's GPU
  /// with NCCL, the CPU with Gloo. Build tensors there to save copies.
  virtual c10::Device device() const = 0;
};

}  // namespace trainyard
