#include "train/output_fit.h"

#include <ATen/ATen.h>

#include "train/components.h"
#include "train/guard.h"
#include "util/shape.h"

namespace trainyard::host {

std::optional<OutputMisfit> output_misfit(const at::Tensor& output, int64_t rows, const c10::Device& device) {
  if (!output.defined()) return OutputMisfit{"forward returned an undefined tensor", "expected a tensor of outputs"};
  if (!at::isFloatingType(output.scalar_type()))
    return OutputMisfit{"forward returned " + std::string(c10::toString(output.scalar_type())) + " values",
                        "expected floating-point outputs"};
  if (output.device() != device)
    return OutputMisfit{"forward returned a tensor on " + output.device().str(),
                        "expected it on " + device.str() + ", where the batch is"};
  if (output.dim() == 0 || output.size(0) != rows)
    return OutputMisfit{"forward returned " + shape_text(output.sizes()),
                        "expected one row per sample: " + std::to_string(rows) + " rows"};
  return std::nullopt;
}

at::Tensor checked_loss(const Components& c, const at::Tensor& output, const Batch& batch, const Fields& fields,
                        const char* split) {
  // The batch's rows and device as the loss sees them: the target's, else the input's.
  const at::Tensor& reference = batch.target.defined() ? batch.target : batch.input;
  const int64_t rows = reference.defined() && reference.dim() > 0 ? reference.size(0) : batch.size();
  const c10::Device device = reference.defined() ? reference.device() : output.device();
  if (const auto misfit = output_misfit(output, rows, device)) {
    const ComponentConfig& net = *c.network.config;
    std::string batch_text = " for a " + std::string(split) + " batch of " + std::to_string(rows) + " samples";
    if (batch.input.defined()) batch_text += ", input " + shape_text(batch.input.sizes());
    if (batch.target.defined()) batch_text += ", target " + shape_text(batch.target.sizes());
    throw LocatedConfigError(
        net.where + " (" + component_label(net) + "): " + misfit->what + batch_text,
        misfit->expected + " (the loss, " + c.loss.config->plugin + ", compares them with the target)", "");
  }
  if (FieldLoss* with_fields = c.loss.facets.field_loss)
    return guarded(*c.loss.config, "compute", [&] { return with_fields->compute_with_fields(output, batch, fields); });
  return guarded(*c.loss.config, "compute", [&] { return c.loss.object->compute(output, batch); });
}

void update_meter(const Built<Meter>& m, const MeterInput& input, const Fields& fields) {
  if (FieldMeter* with_fields = m.facets.field_meter)
    return guarded(*m.config, "update", [&] { with_fields->update_with_fields(input, fields); });
  guarded(*m.config, "update", [&] { m.object->update(input); });
}

}  // namespace trainyard::host
