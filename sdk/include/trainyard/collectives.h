#pragma once
/// Collectives a component may use in a multi-process run (SDK API 1.2).
/// Context::collectives is null in a single-process run.
///
/// Every rank must make the same calls in the same order (the processes
/// match collectives by order), so only call them from code every rank runs
/// identically, such as a layer's forward and backward.
///
/// Example:
///   if (context.collectives) context.collectives->all_reduce_sum(local_sums);

#include <ATen/core/Tensor.h>

namespace trainyard {

class Collectives {
 public:
  virtual ~Collectives();
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Replaces `tensor` (on every rank) with its element-wise sum over ranks.
  virtual void all_reduce_sum(at::Tensor& tensor) const = 0;
};

}  // namespace trainyard
