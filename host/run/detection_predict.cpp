#include "run/detection_predict.h"

#include <filesystem>

#include <ATen/ATen.h>

#include "run/original_geometry.h"
#include "train/detections.h"
#include "train/guard.h"
#include "trainyard/error.h"
#include "util/csv.h"
#include "util/files.h"
#include "util/json.h"

namespace fs = std::filesystem;

namespace trainyard::host {

std::vector<int64_t> category_ids(const LoadedModel& m) {
  const Built<Dataset>& data = m.evaluation_data();
  const int64_t classes = m.context.dataset.num_classes;
  std::vector<int64_t> ids;
  if (data.facets.annotation_ids)
    ids = guarded(*data.config, "class_ids", [&] { return data.facets.annotation_ids->class_ids(); });
  else
    for (int64_t k = 0; k < classes; ++k) ids.push_back(k);
  if (static_cast<int64_t>(ids.size()) != classes)
    throw ConfigError("predict: " + m.evaluation_split + " gives " + std::to_string(ids.size()) + " class ids",
                      "expected one per class (" + std::to_string(classes) + ")", "");
  return ids;
}

namespace {

// Each input image's id: the dataset's where it knows them all, else 1 to N.
std::vector<int64_t> image_ids(const LoadedModel& m, const std::vector<std::string>& sources) {
  const Built<Dataset>& data = m.evaluation_data();
  std::vector<int64_t> ids;
  if (const AnnotationIds* known = data.facets.annotation_ids)
    for (const auto& source : sources) {
      const int64_t id = guarded(*data.config, "image_id", [&] { return known->image_id(source); });
      if (id < 0) break;
      ids.push_back(id);
    }
  if (ids.size() == sources.size()) return ids;
  ids.clear();
  for (size_t i = 0; i < sources.size(); ++i) ids.push_back(static_cast<int64_t>(i) + 1);
  return ids;
}

}  // namespace

int64_t predict_detections(const LoadedModel& m, InputSet& input, const PredictRequest& request) {
  check_image_prediction(input.labeled, request.input, request.output, "is a detector",
                         "boxes are written in each image's own pixels");
  const ImageGeometry geometry = image_geometry(input.preprocessing);
  const std::vector<int64_t> categories = category_ids(m);
  const std::vector<int64_t> ids = image_ids(m, input.sources);
  const auto& names = m.context.dataset.class_names;
  auto class_name = [&](int64_t c) {
    return c < static_cast<int64_t>(names.size()) ? names[size_t(c)] : std::to_string(c);
  };
  const fs::path root = fs::absolute(request.input);
  NewFolder folder(request.output);  // nothing half-written: the folder appears whole, or not at all

  nlohmann::ordered_json results = nlohmann::ordered_json::array(), images = nlohmann::ordered_json::array();
  std::string csv = csv_row({"index", "source", "image_id", "class", "category_id", "score", "x1", "y1", "x2", "y2"});
  std::vector<int64_t> order(static_cast<size_t>(input.dataset->size()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  BatchStream batches = batch_stream(*input.dataset, order, 0, 0, input.loader, std::make_shared<LoaderStats>());
  const Evaluator evaluator = m.evaluator();
  m.network().eval();
  at::NoGradGuard no_grad;
  int64_t read = 0;
  while (auto batch = batches()) {
    // Each sample's geometry, as the dataset's fields would carry it: the decode's boxes go back through it.
    std::vector<double> affines;
    std::vector<cv::Size> sizes;
    for (const int64_t sample : batch->indices) {
      sizes.push_back(stored_size(input.sources[static_cast<size_t>(sample)], "predict"));
      const cv::Matx23d a = input_from_original(sizes.back(), geometry);
      affines.insert(affines.end(), a.val, a.val + 6);
    }
    Fields fields;
    fields[field_name::input_from_original] = meta(at::tensor(affines, at::kDouble).view({batch->size(), 2, 3}));
    const at::Tensor output = evaluator.forward(*batch);
    const Fields found = decoded_detections(m.components, output, *batch, fields);
    for (int64_t k = 0; k < batch->size(); ++k) {
      const int64_t sample = batch->indices[static_cast<size_t>(k)];
      const std::string& source = input.sources[static_cast<size_t>(sample)];
      const int64_t image_id = ids[static_cast<size_t>(sample)];
      const cv::Size size = sizes[static_cast<size_t>(k)];
      images.push_back({{"id", image_id},
                        {"file_name", fs::relative(source, root).string()},
                        {"height", size.height},
                        {"width", size.width}});
      const at::Tensor boxes = sample_values(found.at(field_name::detected_boxes), k).to(at::kCPU, at::kFloat);
      const at::Tensor labels = sample_values(found.at(field_name::detected_labels), k).to(at::kCPU, at::kLong);
      const at::Tensor scores = sample_values(found.at(field_name::detected_scores), k).to(at::kCPU, at::kFloat);
      for (int64_t d = 0; d < boxes.size(0); ++d) {
        const int64_t label = labels[d].item<int64_t>();
        if (label < 0 || label >= static_cast<int64_t>(categories.size()))
          throw ConfigError("predict: the network (" + m.stage->network.plugin + ")'s decode gave class " +
                                std::to_string(label) + " for " + source,
                            "expected 0 to " + std::to_string(categories.size() - 1), "");
        const double x1 = shortest_float(boxes[d][0].item<float>()), y1 = shortest_float(boxes[d][1].item<float>());
        const double x2 = shortest_float(boxes[d][2].item<float>()), y2 = shortest_float(boxes[d][3].item<float>());
        const double score = shortest_float(scores[d].item<float>());
        const int64_t category = categories[static_cast<size_t>(label)];
        results.push_back({{"image_id", image_id},
                           {"category_id", category},
                           {"bbox", {x1, y1, shortest_float(float(x2 - x1)), shortest_float(float(y2 - y1))}},
                           {"score", score}});
        csv += csv_row({std::to_string(sample), source, std::to_string(image_id), class_name(label),
                        std::to_string(category), json_number(score), json_number(x1), json_number(y1), json_number(x2),
                        json_number(y2)});
      }
      ++read;
    }
  }
  nlohmann::ordered_json classes = nlohmann::ordered_json::array();
  for (size_t k = 0; k < categories.size(); ++k)
    classes.push_back({{"id", categories[k]}, {"name", class_name(static_cast<int64_t>(k))}});
  const nlohmann::ordered_json listing = {
      {"images", images}, {"annotations", nlohmann::ordered_json::array()}, {"categories", classes}};
  write_file_atomic(folder.dir() + "/results.json", json_text(results) + "\n");
  write_file_atomic(folder.dir() + "/images.json", json_text(listing) + "\n");
  write_file_atomic(folder.dir() + "/predictions.csv", csv);
  folder.commit();
  return read;
}

}  // namespace trainyard::host
