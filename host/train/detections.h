#pragma once
// A detector's output as detections (SDK 1.5 Detector): decoded once per
// batch, mapped to each sample's original image, and added to the batch's
// fields for the meters that read them.
#include <vector>

#include <ATen/core/Tensor.h>

#include "train/components.h"
#include "trainyard/batch.h"
#include "trainyard/fields.h"

namespace trainyard::host {

/// The fields `meters` see for a batch: `fields`, plus detected_boxes (in the
/// original image's pixels, through each sample's input_from_original where
/// the batch has it), detected_labels and detected_scores when the network is
/// a Detector and one of the meters reads fields; else `fields` as they are.
/// A decode that gives other fields than these, or not one count per sample,
/// is a ConfigError naming the network.
Fields fields_for_meters(const Components& c, const std::vector<Built<Meter>>& meters, const at::Tensor& output,
                         const Batch& batch, const Fields& fields);

/// The detections of `output` with their boxes in original pixels (as above),
/// for predict; the network must be a Detector.
Fields decoded_detections(const Components& c, const at::Tensor& output, const Batch& batch, const Fields& fields);

}  // namespace trainyard::host
