#pragma once
// The global L2 norm of the gradients, computed at every update: it is the
// non-finite check and the clipping norm at once, so it must cost next to
// nothing on small models (docs/performance.md, "Per-step overhead").
#include <map>
#include <tuple>
#include <vector>

#include <ATen/core/Tensor.h>

namespace trainyard::host {

/// Tensors grouped by (device type, device index, dtype): what one call of
/// ATen's multi-tensor (_foreach_) kernels takes on its fast path.
using TensorGroups = std::map<std::tuple<c10::DeviceType, c10::DeviceIndex, at::ScalarType>, std::vector<at::Tensor>>;
TensorGroups by_device_and_dtype(const std::vector<at::Tensor>& tensors);

/// Clamps every gradient to [-max_value, max_value] (foreach, per device and
/// dtype: a few launches on a GPU, not one per gradient); nothing for max_value 0.
void clamp_gradients(std::vector<at::Tensor>& grads, double max_value);

/// Multiplies every gradient by `factor`, a 0-dim tensor, without reading
/// it: per (device, dtype) group, with the factor in the group's type, which
/// ATen's multi-tensor kernel takes on its fast path (one launch a group; a
/// factor of another type is a multiply per tensor on CUDA). bf16 and fp16
/// gradients are so scaled by the factor rounded to their own precision (a
/// relative error under 0.4% and 0.05%), the rounding they carry themselves.
void scale_gradients_by(std::vector<at::Tensor>& grads, const at::Tensor& factor);

/// The sum of the squared L2 norms of `grads`: NaN or infinite when any
/// element is. Contiguous float32 CPU tensors are read in place (no ATen
/// call); the others take one foreach norm per device and dtype
/// (at::_foreach_norm) and a single read back.
/// `poison` (a 0-dim tensor, or undefined) is added to the sum in the same
/// read: 0 leaves it, NaN makes it NaN (the Updater's check of its losses).
double squared_norm(const std::vector<at::Tensor>& grads, const at::Tensor& poison = {});

/// The same sum left where it was computed, as a 0-dim double tensor: on the
/// gradients' device (the first non-CPU one), or on the CPU for the in-place
/// path. Nothing is read back: on a GPU the host does not wait.
at::Tensor squared_norm_tensor(const std::vector<at::Tensor>& grads, const at::Tensor& poison = {});

/// Clamps every gradient to [-max_value, max_value] (0: no clamp), then scales
/// them all down to a global L2 norm of at most max_norm (0: no scaling).
/// Returns the global norm after clamping and before scaling. `poison`, if
/// given, is added to the squared norm in the same read (see squared_norm).
double clip_gradients(std::vector<at::Tensor>& grads, double max_value, double max_norm, const at::Tensor& poison = {});

/// Every gradient times a factor known on the host, one call per device and
/// dtype, each gradient multiplied exactly as by its own mul_(factor).
void scale_gradients(std::vector<at::Tensor>& grads, double factor);

}  // namespace trainyard::host
