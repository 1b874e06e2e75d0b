#pragma once
// 8-bit pixel batches become the network's float inputs on the device that
// runs the network (Dataset::input_normalization, SDK 1.2).
#include <ATen/core/Tensor.h>

#include "trainyard/dataset.h"

namespace trainyard::host {

/// uint8 {N, C, ...} -> float (x / 255 - mean[c]) / std[c], on the batch's
/// device and in its memory format (channels-last stays channels-last). On
/// the CPU one pass through a 256-entry table per channel, split over ATen's
/// intra-op threads; elsewhere ATen's element-wise kernels. Throws ConfigError
/// when mean/std do not have one value per channel.
at::Tensor normalize_pixels(const at::Tensor& pixels, const InputNormalization& normalization);

}  // namespace trainyard::host
