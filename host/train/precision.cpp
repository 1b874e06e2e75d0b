#include "train/precision.h"

#include <ATen/autocast_mode.h>

#include <limits>

namespace trainyard::host {

PrecisionChoice choose_precision(const std::string& requested, const CpuFacts& cpu, bool on_gpus,
                                 const std::optional<GpuFacts>& gpu) {
  PrecisionChoice c;
  if (on_gpus) {
    if (requested != "auto") return {requested, "as written", ""};
    if (!gpu) return {"fp32", "auto: no GPU seen to ask", ""};
    const std::string which =
        gpu->name + ", compute capability " + std::to_string(gpu->major) + "." + std::to_string(gpu->minor);
    if (gpu->major >= 8) return {"bf16-mixed", "auto: " + which + " computes in bfloat16 natively", ""};
    return {"fp16-mixed",
            "auto: " + which + " has no bfloat16 arithmetic (8.0 and newer have); float16 with loss scaling", ""};
  }
  const std::string why_not = cpu.no_native_bf16_reason();
  if (requested == "auto") {
    if (why_not.empty()) return {"bf16-mixed", "auto: this CPU computes in bfloat16 natively (" + cpu.name + ")", ""};
    return {"fp32", "auto: bfloat16 would be emulated on this CPU (" + why_not + ")", ""};
  }
  c.precision = requested;
  c.reason = "as written";
  if (requested == "bf16-mixed" && !why_not.empty())
    c.warning = "loop.precision: bf16-mixed is emulated on this CPU (" + (cpu.name.empty() ? "" : cpu.name + ": ") +
                why_not +
                "): convnets measured 6-16x slower than fp32 on such CPUs; use loop.precision: auto "
                "(fp32 here) or fp32";
  return c;
}

std::optional<at::ScalarType> autocast_dtype(const std::string& precision) {
  if (precision == "bf16-mixed") return at::kBFloat16;
  if (precision == "fp16-mixed") return at::kHalf;
  return std::nullopt;
}

AutocastScope::AutocastScope(c10::DeviceType device, std::optional<at::ScalarType> dtype) : device_(device) {
  if (!dtype) return;
  active_ = true;
  was_enabled_ = at::autocast::is_autocast_enabled(device_);
  was_dtype_ = at::autocast::get_autocast_dtype(device_);
  at::autocast::set_autocast_enabled(device_, true);
  at::autocast::set_autocast_dtype(device_, *dtype);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // Casted weights are cached for the scope's lifetime only (they change at every update).
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, was_enabled_);
  at::autocast::set_autocast_dtype(device_, was_dtype_);
}

at::Tensor as_fp32(const at::Tensor& output) {
  if (!output.defined() || !output.is_floating_point()) return output;
  const auto t = output.scalar_type();
  return (t == at::kHalf || t == at::kBFloat16) ? output.to(at::kFloat) : output;
}

bool LossScaler::update(bool finite) {
  if (!enabled) return true;
  if (!finite) {
    scale *= kBackoff;
    finite_in_a_row = 0;
    ++skipped;
    return false;
  }
  if (++finite_in_a_row == kGrowthInterval) {
    if (scale * kGrowth <= std::numeric_limits<float>::max()) scale *= kGrowth;  // as GradScaler: stays a float
    finite_in_a_row = 0;
  }
  return true;
}

}  // namespace trainyard::host
