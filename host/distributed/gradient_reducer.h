#pragma once
// Gradient averaging over ranks, overlapped with the backward pass.
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

namespace trainyard::host {

class Communicator;

/// Averages gradients over ranks while backward runs: a hook on every
/// parameter copies its gradient into a flat bucket as soon as autograd
/// produces it, and a full bucket starts its all-reduce at once, overlapping
/// communication with the rest of the backward pass. Buckets are launched in
/// one fixed order on every rank (Gloo matches collectives by order).
///
///   reducer.prepare();  loss.backward();  reducer.finish();  optimizer.step();
class GradientReducer {
 public:
  GradientReducer(Communicator& comm, std::vector<at::Tensor> parameters, size_t bucket_bytes);
  ~GradientReducer();
  /// Before the first backward of an update: empty buckets.
  void prepare();
  /// With gradient accumulation, only the update's last backward
  /// communicates; earlier ones just accumulate into .grad.
  void set_active(bool active);
  /// After backward (or instead of it, for a rank without data): launches what
  /// is left, waits, and writes the averaged gradients into .grad.
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainyard::host
