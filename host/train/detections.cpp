#include "train/detections.h"

#include <ATen/ATen.h>

#include "train/guard.h"
#include "util/shape.h"

namespace trainyard::host {

Fields decoded_detections(const Components& c, const at::Tensor& output, const Batch& batch, const Fields& fields) {
  const Detector& detector = *c.network.facets.detector;
  const ComponentConfig& net = *c.network.config;
  Fields found = guarded(net, "decode", [&] { return detector.decode(output, batch); });
  const int64_t rows = batch.size();
  for (const char* name : {field_name::detected_boxes, field_name::detected_labels, field_name::detected_scores}) {
    const auto it = found.find(name);
    const bool fits = it != found.end() && it->second.kind == FieldKind::ragged && it->second.values.defined() &&
                      it->second.counts.defined() && it->second.counts.dim() == 1 &&
                      it->second.counts.size(0) == rows &&
                      it->second.counts.sum().item<int64_t>() == it->second.values.size(0);
    if (!fits)
      throw LocatedConfigError(
          net.where + " (" + component_label(net) + "): decode gave no fitting field '" + name + "'",
          "expected ragged detected_boxes {n, 4}, detected_labels {n} and detected_scores {n} "
          "with one count per sample (" +
              std::to_string(rows) + ")",
          "");
  }
  Field& boxes = found.at(field_name::detected_boxes);
  if (boxes.values.dim() != 2 || boxes.values.size(1) != 4)
    throw LocatedConfigError(
        net.where + " (" + component_label(net) + "): decode gave detected_boxes " + shape_text(boxes.values.sizes()),
        "expected {n, 4}: x1, y1, x2, y2", "");
  boxes.counts = boxes.counts.to(at::kCPU);
  const auto geometry = fields.find(field_name::input_from_original);
  if (geometry == fields.end()) return found;
  // Once, here: meters and predict work in the original image's pixels.
  std::vector<at::Tensor> mapped;
  for (int64_t k = 0; k < rows; ++k)
    mapped.push_back(boxes_to_original(sample_values(boxes, k), sample_values(geometry->second, k)));
  boxes.values = at::cat(mapped).to(boxes.values.options().dtype(at::kFloat));
  return found;
}

Fields fields_for_meters(const Components& c, const std::vector<Built<Meter>>& meters, const at::Tensor& output,
                         const Batch& batch, const Fields& fields) {
  if (!c.network.facets.detector || fields.empty()) return fields;
  bool wanted = false;
  for (const auto& m : meters) wanted |= m.facets.field_meter != nullptr;
  if (!wanted) return fields;
  Fields all = fields;
  for (auto& [name, field] : decoded_detections(c, output, batch, fields)) all[name] = std::move(field);
  return all;
}

}  // namespace trainyard::host
