#include "annotated_dataset.h"

#include <cmath>

#include <ATen/ATen.h>
#include <trainyard/coco.h>
#include <trainyard/error.h>
#include <trainyard/record.h>

namespace image_datasets {
namespace {

// at::Tensor of a 2x3 double matrix.
at::Tensor matrix_tensor(const cv::Matx23d& m) {
  return at::tensor(std::vector<double>(m.val, m.val + 6), at::kDouble).view({2, 3});
}

}  // namespace

trainyard::FieldExample AnnotatedImageDataset::get_with_fields(int64_t index, uint64_t seed) const {
  const AnnotatedSample a = labelled(read_annotated(index));
  trainyard::Fields fields = fields_of(a.annotations, seed);
  return {example_of(a.sample, seed), std::move(fields)};
}

trainyard::FieldBatch AnnotatedImageDataset::get_batch_with_fields(const std::vector<int64_t>& indices,
                                                                   const std::vector<uint64_t>& seeds) const {
  if (!decodes_on_gpu()) return FieldDataset::get_batch_with_fields(indices, seeds);  // get_with_fields each
  std::vector<LoadedSample> samples;
  std::vector<trainyard::Fields> fields;
  samples.reserve(indices.size());
  fields.reserve(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    AnnotatedSample a = labelled(read_annotated(indices[k]));
    fields.push_back(fields_of(a.annotations, seeds[k]));
    samples.push_back(std::move(a.sample));
  }
  return {decode_loaded_on_gpu(samples, indices, seeds), trainyard::collate_fields(fields, indices)};
}

AnnotatedSample AnnotatedImageDataset::labelled(AnnotatedSample a) const {
  if (transforms().target == "boxes") {
    int64_t counted = 0;
    for (const StoredBox& b : a.annotations.boxes) counted += !b.crowd;
    a.sample.label = at::scalar_tensor(counted, at::kLong);
  }
  return a;
}

// The sample's fields: its image's size, id and geometry, and with
// target: boxes its boxes through that geometry.
trainyard::Fields AnnotatedImageDataset::fields_of(const SampleAnnotations& a, uint64_t seed) const {
  namespace name = trainyard::field_name;
  const SampleAffine geometry = sample_affine(a.stored, transforms(), seed);
  trainyard::Fields f;
  f[name::original_size] = trainyard::meta(at::tensor({int64_t{a.stored.height}, int64_t{a.stored.width}}, at::kLong));
  f[name::input_from_original] = trainyard::meta(matrix_tensor(geometry.affine));
  if (a.image_id) f[name::image_id] = trainyard::meta(at::scalar_tensor(*a.image_id, at::kLong));
  if (transforms().target != "boxes") return f;
  std::vector<std::array<double, 4>> boxes;
  for (const StoredBox& b : a.boxes) boxes.push_back(b.box);
  std::vector<size_t> kept;
  const std::vector<std::array<double, 4>> out =
      transform_boxes(boxes, geometry, transforms().min_box_visible, transforms().min_box_size, kept);
  std::vector<float> xyxy, areas;
  std::vector<int64_t> labels, crowd;
  for (size_t k = 0; k < out.size(); ++k) {
    const StoredBox& b = a.boxes[kept[k]];
    for (const double v : out[k]) xyxy.push_back(static_cast<float>(v));
    labels.push_back(b.label);
    crowd.push_back(b.crowd ? 1 : 0);
    areas.push_back(static_cast<float>(b.area));
  }
  const auto n = static_cast<int64_t>(out.size());
  f[name::boxes] = trainyard::ragged(at::tensor(xyxy, at::kFloat).view({n, 4}));
  f[name::box_labels] = trainyard::ragged(at::tensor(labels, at::kLong));
  f[name::box_crowd] = trainyard::ragged(at::tensor(crowd, at::kLong));
  f[name::box_area] = trainyard::ragged(at::tensor(areas, at::kFloat));
  return f;
}

std::vector<StoredBox> boxes_of_label(const std::vector<float>& values, const std::string& what) {
  std::vector<StoredBox> boxes;
  for (size_t k = 0; k + trainyard::kBoxLabelValues <= values.size(); k += trainyard::kBoxLabelValues) {
    const float* v = &values[k];
    const auto where = [&] { return what + ": box " + std::to_string(boxes.size()) + ": "; };
    if (!(v[4] >= 0 && v[4] < 1e9f && v[4] == std::floor(v[4])))
      throw trainyard::BadRecord(where() + "class " + std::to_string(v[4]) + ", expected a class index (0, 1, ...)");
    if (v[5] != 0 && v[5] != 1)
      throw trainyard::BadRecord(where() + "crowd flag " + std::to_string(v[5]) + ", expected 0 or 1");
    boxes.push_back({{v[0], v[1], v[2], v[3]}, static_cast<int64_t>(v[4]), v[5] == 1, v[6]});
  }
  return boxes;
}

void check_stored_boxes(const std::vector<StoredBox>& boxes, cv::Size stored, int64_t classes,
                        const std::string& what) {
  for (size_t k = 0; k < boxes.size(); ++k) {
    const StoredBox& b = boxes[k];
    const auto [x1, y1, x2, y2] = b.box;
    const auto fail = [&](const std::string& found, const std::string& expected) {
      throw trainyard::BadRecord(what + ": box " + std::to_string(k) + ": " + found + ", expected " + expected);
    };
    const auto coordinates = [&] {
      char text[128];
      std::snprintf(text, sizeof text, "(%g, %g, %g, %g)", x1, y1, x2, y2);
      return std::string(text);
    };
    if (!std::isfinite(x1) || !std::isfinite(y1) || !std::isfinite(x2) || !std::isfinite(y2) || !(x1 < x2) ||
        !(y1 < y2))
      fail(coordinates(), "finite x1, y1, x2, y2 with x1 < x2 and y1 < y2");
    if (!trainyard::coco::box_inside(b.box, stored.height, stored.width))
      fail(coordinates(), "a box inside the image's " + std::to_string(stored.height) + "x" +
                              std::to_string(stored.width) + " pixels");
    if (b.label < 0 || b.label >= classes)
      fail("class " + std::to_string(b.label), "a class from 0 to " + std::to_string(classes - 1));
    if (!std::isfinite(b.area) || !(b.area > 0)) fail("area " + std::to_string(b.area), "a finite area above 0");
  }
}

}  // namespace image_datasets
