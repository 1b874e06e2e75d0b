#pragma once
// The global L2 norm of the gradients, computed at every update: it is the
// non-finite check and the clipping norm at once, so it must cost next to
// nothing on small models (docs/performance.md, "Per-step overhead").
#include <vector>

#include <ATen/core/Tensor.h>

namespace trainyard::host {

/// The sum of the squared L2 norms of `grads`: NaN or infinite when any
/// element is. Contiguous float32 CPU tensors are read in place (no ATen
/// call); the others take one foreach norm per device and dtype
/// (at::_foreach_norm) and a single read back.
double squared_norm(const std::vector<at::Tensor>& grads);

}  // namespace trainyard::host
