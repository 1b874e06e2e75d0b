#include "run/task_metadata.h"

#include <variant>

#include "run/dense_predict.h"
#include "run/detection_predict.h"
#include "trainyard/version.h"

namespace trainyard::host {

nlohmann::ordered_json task_metadata(const LoadedModel& m) {
  using nlohmann::ordered_json;
  const Experiment& e = *m.stage;
  const DatasetInfo& info = m.context.dataset;
  ordered_json meta;
  meta["trainyard"] = TRAINYARD_VERSION;
  meta["network"] = e.network.plugin;
  const auto kind = network_output_kind(m.components.network);
  if (const Detector* detector = m.components.network.facets.detector) {
    // Checked before the pixels: a detector's heatmaps are [B, C, h, w] too.
    meta["task"] = "detection";
    meta["output"] =
        "the network's own encoding; its decode (SDK 1.5 Detector) gives per image boxes (x1, y1, x2, y2), classes "
        "and scores, highest first";
    meta["box_format"] = "xyxy, pixels of the network's input, pixel edges on integers (top-left corner (0, 0))";
    meta["score_threshold"] = detector->score_threshold();
  } else if (scores_pixels(m)) {
    meta["task"] = "segmentation";
    meta["output"] = "[B, C, H, W] class scores of each pixel (logits); the mask is their argmax over C";
  } else if (kind == OutputKind::embeddings) {
    meta["task"] = "embedding";
    meta["output"] = "[B, D] embeddings";
  } else if (info.num_classes > 0) {
    meta["task"] = "classification";
    meta["output"] = "[B, C] class scores (logits); softmax over C for probabilities";
  } else {
    meta["task"] = "other";
    meta["output"] = "what the network returns";
  }
  ordered_json classes = ordered_json::array();
  for (int64_t c = 0; c < info.num_classes; ++c)
    classes.push_back(c < static_cast<int64_t>(info.class_names.size()) ? info.class_names[static_cast<size_t>(c)]
                                                                        : std::to_string(c));
  meta["classes"] = classes;
  // The ids results files use for them (a COCO file's category ids).
  if (meta["task"] == "detection") meta["category_ids"] = category_ids(m);
  // The void label the loss ignored: pixels of it in a mask are no class.
  const auto& loss = e.loss.options.values();
  if (const auto it = loss.find("ignore_index"); meta["task"] == "segmentation" && it != loss.end())
    meta["ignore_index"] = std::visit([](const auto& v) { return ordered_json(v); }, it->second);
  ordered_json input;
  input["sample_shape"] = info.sample_shape;
  if (m.image_preprocessing) {
    ordered_json steps;
    for (const auto& [key, value] : *m.image_preprocessing)
      steps[key] = std::visit([](const auto& v) { return ordered_json(v); }, value);
    input["preprocessing"] = steps;
    input["layout"] =
        "[C, H, W] float, RGB (or grey), (pixel / 255 - mean[c]) / std[c] after the resize and crop; the "
        "preprocessing's keys are the image datasets' options (docs/experiment-yaml.md)";
  } else {
    input["preprocessing"] = nullptr;  // the dataset did not say (SDK 1.0, or not images)
  }
  meta["input"] = input;
  return meta;
}

}  // namespace trainyard::host
