#pragma once
// What a model file cannot say by itself: the task, the classes and how an
// image becomes the network's input. `trainyard export` writes it beside
// the weights (OUTPUT.json) so that a deployment outside trainyard decodes
// the outputs and prepares the inputs as training did.
#include <nlohmann/json.hpp>

#include "run/loaded_model.h"

namespace trainyard::host {

/// {trainyard, network, task, output, classes, ignore_index (segmentation,
/// when the loss has one), box_format and score_threshold (detection),
/// input: {sample_shape, preprocessing}}. task is "detection" (the network
/// is an SDK 1.5 Detector), "segmentation" (the network scores every pixel: dense_predict.h),
/// "embedding" (SDK 1.4 NetworkOutputs says so), "classification" (the
/// dataset has classes) or "other".
nlohmann::ordered_json task_metadata(const LoadedModel& m);

}  // namespace trainyard::host
