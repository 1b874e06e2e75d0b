#pragma once
// loop.precision: mixed precision through LibTorch's autocast, and the dynamic
// loss scaling that float16 needs.
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "distributed/device.h"

namespace trainyard::host {

/// What loop.precision means on this machine: `auto` resolved, or the
/// precision written, with the reason, and a warning when the written one is
/// slow here (bf16-mixed on a CPU that emulates bfloat16).
struct PrecisionChoice {
  std::string precision;  ///< fp32 | bf16-mixed | fp16-mixed
  std::string reason;     ///< "auto: this CPU has no AVX512-BF16 or AMX-BF16 instructions"
  std::string warning;    ///< empty, or why the choice is slow here and what to use instead
};

/// `requested` (fp32, bf16-mixed, fp16-mixed or auto) on a CPU with `cpu`, or
/// on a GPU with `gpu` (set when the run trains on GPUs; unset when GPUs were
/// asked for and none is seen: rank_device() reports that). auto picks
/// bf16-mixed where bfloat16 is native (CPUs with AVX512-BF16 or AMX-BF16,
/// GPUs from compute capability 8.0), fp16-mixed with loss scaling on older
/// GPUs, and fp32 on every other CPU.
PrecisionChoice choose_precision(const std::string& requested, const CpuFacts& cpu, bool on_gpus,
                                 const std::optional<GpuFacts>& gpu);

/// The autocast dtype of loop.precision: none for fp32, bfloat16 for
/// bf16-mixed, float16 for fp16-mixed (the one that needs loss scaling).
std::optional<at::ScalarType> autocast_dtype(const std::string& precision);

/// Autocast for one scope on one device type, as torch.autocast does it: the
/// previous enabled flag and dtype come back at the end, and the cache of
/// casted weights is cleared when the outermost scope ends. No dtype: a no-op.
///
///   { AutocastScope autocast(at::kCPU, at::kBFloat16); output = net->forward(batch); }
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device, std::optional<at::ScalarType> dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  bool active_ = false, was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

/// A network output made fp32 (a lower-precision floating tensor is cast,
/// anything else is returned as is): the loss, the meters and the non-finite
/// check see fp32 whatever precision the forward ran in.
at::Tensor as_fp32(const at::Tensor& output);

/// `forward()` under `precision`'s autocast on `device`, its output as fp32:
/// how every forward of the network runs (training, testing, prediction,
/// dry runs), so the loss, meters and non-finite check always see fp32.
///
///   at::Tensor out = forward_in_precision(at::kCPU, "bf16-mixed", [&] { return net.forward(batch); });
template <class Forward>
at::Tensor forward_in_precision(c10::DeviceType device, const std::string& precision, Forward&& forward) {
  at::Tensor output;
  {
    AutocastScope autocast(device, autocast_dtype(precision));
    output = forward();
  }
  return as_fp32(output);
}

/// Dynamic loss scaling for fp16-mixed, with PyTorch's GradScaler defaults:
/// the loss is multiplied by scale() before backward; after the gradients are
/// averaged and unscaled, update(finite) halves the scale and the update is
/// skipped when any gradient overflowed, and doubles it after 2000 finite
/// updates in a row. Its state is in every checkpoint, so a resume continues
/// with the same scale and the same skips.
class LossScaler {
 public:
  static constexpr double kInitialScale = 65536.0, kGrowth = 2.0, kBackoff = 0.5;
  static constexpr int64_t kGrowthInterval = 2000;

  bool enabled = false;
  double scale = kInitialScale;
  int64_t finite_in_a_row = 0;  ///< finite updates since the scale last changed
  int64_t skipped = 0;          ///< updates skipped for overflow, in the whole run

  /// The factor backward's loss is multiplied by: scale, or 1 when disabled.
  double factor() const { return enabled ? scale : 1.0; }
  /// After an update's gradients: true when the optimizer may step.
  bool update(bool finite);
};

}  // namespace trainyard::host
