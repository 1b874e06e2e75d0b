#pragma once
// The network's output against the batch it was given, checked where the
// loss takes it: an output that cannot be the batch's answer is the
// network's failure, named with both shapes, not a failure inside the loss
// that names the loss ("Expected input batch_size (8) to match target
// batch_size (16)"). The wiring check applies the same rule before training.
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

#include "train/components.h"
#include "trainyard/batch.h"
#include "trainyard/fields.h"
#include "trainyard/meter.h"

namespace trainyard::host {

struct OutputMisfit {
  std::string what;      ///< "forward returned [8, 10]"
  std::string expected;  ///< "expected one row per sample: 16 rows"
};

/// Why `output` cannot be the network's answer to a batch of `rows` samples
/// whose tensors are on `device`: undefined, not floating point, on another
/// device, or not one row per sample; nullopt when it fits.
std::optional<OutputMisfit> output_misfit(const at::Tensor& output, int64_t rows, const c10::Device& device);

/// The loss of `output` for `batch`, the output checked first (a misfit is a
/// ConfigError naming the network's entry, the output's shape and the
/// batch's). Used by every step that computes a loss: training, the test
/// pass, the captured step and the dry run. A loss that reads fields (SDK
/// 1.5 FieldLoss) gets the batch's `fields`.
at::Tensor checked_loss(const Components& c, const at::Tensor& output, const Batch& batch, const Fields& fields,
                        const char* split);

/// Updates meter `m` with a batch: through FieldMeter (SDK 1.5) with the
/// batch's `fields` where the meter reads fields, else Meter::update.
void update_meter(const Built<Meter>& m, const MeterInput& input, const Fields& fields);

}  // namespace trainyard::host
