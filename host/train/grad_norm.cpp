#include "train/grad_norm.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

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

TensorGroups by_device_and_dtype(const std::vector<at::Tensor>& tensors) {
  TensorGroups groups;
  for (const at::Tensor& t : tensors) groups[{t.device().type(), t.device().index(), t.scalar_type()}].push_back(t);
  return groups;
}

void scale_gradients_by(std::vector<at::Tensor>& grads, const at::Tensor& factor) {
  for (auto& [key, tensors] : by_device_and_dtype(grads)) {
    const at::Device device(std::get<0>(key), std::get<1>(key));
    at::_foreach_mul_(tensors, factor.to(device, std::get<2>(key)));
  }
}

void clamp_gradients(std::vector<at::Tensor>& grads, double max_value) {
  if (max_value <= 0 || grads.empty()) return;
  for (auto& [key, group] : by_device_and_dtype(grads)) {  // one dtype a call: the kernels' fast path
    at::_foreach_clamp_min_(group, -max_value);
    at::_foreach_clamp_max_(group, max_value);
  }
}

at::Tensor squared_norm_tensor(const std::vector<at::Tensor>& grads, const at::Tensor& poison) {
  double sum = 0;                  // of the gradients read in place
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
  if (others.empty()) {
    if (!poison.defined()) return at::scalar_tensor(sum, at::TensorOptions().dtype(at::kDouble));
    return poison.to(at::kDouble) + sum;  // where the losses are: nothing read back
  }
  // One foreach norm per (device, dtype) group (on CUDA, a few launches
  // however many parameters: not one dot each), accumulated in fp32 even
  // for half-precision gradients, summed on the first group's device.
  const at::Device home = others.front().device();
  std::vector<at::Tensor> group_sums;  // each group's sum of squared norms, in double
  for (const auto& [key, tensors] : by_device_and_dtype(others)) {
    const std::optional<at::ScalarType> accumulate =
        at::isReducedFloatingType(std::get<2>(key)) ? std::optional(at::kFloat) : std::nullopt;
    const at::Tensor norms = at::stack(at::_foreach_norm(tensors, 2, accumulate));
    group_sums.push_back(norms.to(at::kDouble).square().sum().to(home));
  }
  if (poison.defined()) group_sums.push_back(poison.to(at::kDouble).to(home));
  at::Tensor total = group_sums.size() == 1 ? group_sums.front() : at::stack(group_sums).sum();
  return sum != 0 ? total + sum : total;
}

double squared_norm(const std::vector<at::Tensor>& grads, const at::Tensor& poison) {
  return squared_norm_tensor(grads, poison).item<double>();  // on a GPU, the one wait for the device
}

namespace {
// A factor for at::_foreach_mul_ as a 0-dim double tensor on the CPU: each
// gradient is multiplied exactly as by its own mul_(factor) (the Scalar
// overload rounds the factor to bf16 or fp16 first for such gradients on the
// CPU).
at::Tensor host_scalar(double factor) { return at::scalar_tensor(factor, at::TensorOptions().dtype(at::kDouble)); }
}  // namespace

// Every gradient times a factor known on the host, one call per device and
// dtype (the multi-tensor kernels' fast path): on the CPU through
// host_scalar (exact, above); elsewhere as a Scalar, which CUDA's kernel
// takes without reading anything back (a CPU scalar tensor is read with
// .item() there first).
void scale_gradients(std::vector<at::Tensor>& grads, double factor) {
  for (auto& [key, group] : by_device_and_dtype(grads)) {
    if (std::get<0>(key) == c10::DeviceType::CPU)
      at::_foreach_mul_(group, host_scalar(factor));
    else
      at::_foreach_mul_(group, factor);
  }
}

double clip_gradients(std::vector<at::Tensor>& grads, double max_value, double max_norm, const at::Tensor& poison) {
  at::NoGradGuard no_grad;
  clamp_gradients(grads, max_value);
  // One read of each gradient: this runs at every update, for the non-finite check too.
  const double norm = std::sqrt(squared_norm(grads, poison));
  if (max_norm > 0 && norm > max_norm) scale_gradients(grads, max_norm / norm);
  return norm;
}

}  // namespace trainyard::host
