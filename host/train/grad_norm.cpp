#include "train/grad_norm.h"

#include <cmath>
#include <cstdint>

#include <ATen/ATen.h>

namespace trainyard::host {
namespace {

// Sum of x[i]^2 over n floats, float accumulation as a BLAS dot.
// One clone per instruction set, picked at load time by the dynamic linker:
// the binary stays portable and runs 16-wide where AVX-512 exists. The 32
// independent accumulators let the compiler vectorize without reordering any
// single accumulator's sum (no -ffast-math needed).
__attribute__((target_clones("avx512f", "avx2", "default"))) float sum_of_squares(const float* x, int64_t n) {
  constexpr int64_t lanes = 32;
  float acc[lanes] = {};
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (int64_t j = 0; j < lanes; ++j) acc[j] += x[i + j] * x[i + j];
  float sum = 0;
  for (; i < n; ++i) sum += x[i] * x[i];
  for (int64_t j = 0; j < lanes; ++j) sum += acc[j];
  return sum;
}

}  // namespace

double squared_norm(const std::vector<at::Tensor>& grads) {
  double sum = 0;
  std::vector<at::Tensor> others;  // on a device, or not float32, or strided
  for (const at::Tensor& g : grads) {
    if (!(g.device().is_cpu() && g.scalar_type() == at::kFloat && g.is_contiguous() && !g.is_sparse())) {
      others.push_back(g);
      continue;
    }
    const float part = sum_of_squares(g.const_data_ptr<float>(), g.numel());
    // Float squares overflow past 1.8e19: tell that apart from a true inf or NaN.
    if (std::isinf(part) && g.isfinite().all().item<bool>())
      sum += g.to(at::kDouble).square().sum().item<double>();
    else
      sum += part;
  }
  if (!others.empty()) {
    // fp32 sums even for half-precision gradients (a float16 dot overflows
    // past 256); one read back for all of them (on a GPU, one sync).
    std::vector<at::Tensor> squares;
    squares.reserve(others.size());
    for (const at::Tensor& g : others) {
      const at::Tensor flat = g.reshape({-1}).to(at::kFloat);
      squares.push_back(at::dot(flat, flat));
    }
    sum += at::stack(squares).sum(at::kDouble).item<double>();
  }
  return sum;
}

}  // namespace trainyard::host
