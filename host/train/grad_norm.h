#pragma once
// The global L2 norm of the gradients, computed at every update: it is the
// non-finite check and the clipping norm at once, so it must cost next to
// nothing on small models (docs/performance.md, "Per-step overhead").
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace trainyard::host {

/// Sum of x[i]^2 over n floats, vectorized for the CPU it runs on (AVX-512,
/// AVX2 or baseline, chosen once at load). Float accumulation, as a BLAS dot.
float sum_of_squares(const float* x, int64_t n);

/// The sum of the squared L2 norms of `grads`: NaN or infinite when any
/// element is. Contiguous float32 CPU tensors are read in place (no ATen
/// call); the others take one tensor reduction each and a single read back.
double squared_norm(const std::vector<at::Tensor>& grads);

}  // namespace trainyard::host
