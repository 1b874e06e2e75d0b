// Collation of samples with fields (trainyard/fields.h): one rule per kind,
// shared by the host's loader and FieldDataset's default batch.
#include "trainyard/fields.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>

#include "trainyard/error.h"

namespace trainyard {
namespace {

std::string shape(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

std::string pair(const std::vector<int64_t>& indices, size_t a, size_t b) {
  return "samples " + std::to_string(indices[a]) + " and " + std::to_string(indices[b]);
}

// The samples' inputs or targets, stacked; samples of another shape are named.
at::Tensor stack_part(const std::vector<FieldExample>& samples, const std::vector<int64_t>& indices, bool input) {
  std::vector<at::Tensor> parts;
  parts.reserve(samples.size());
  for (size_t k = 0; k < samples.size(); ++k) {
    const at::Tensor& t = input ? samples[k].example.input : samples[k].example.target;
    const char* what = input ? "input" : "target";
    if (!t.defined())
      throw ConfigError("sample " + std::to_string(indices[k]) + ": no " + what + " tensor",
                        std::string("expected every sample to have a defined ") + what, "");
    if (k > 0 && t.sizes() != parts[0].sizes())
      throw ConfigError(pair(indices, 0, k) + " differ in " + what + " shape",
                        "expected the samples of a batch to have one shape, got " + shape(parts[0].sizes()) + " and " +
                            shape(t.sizes()),
                        "give the dataset load_size (and crop_size) so that every image has the same size");
    parts.push_back(t);
  }
  return at::stack(parts);
}

// Pads each {H, W, ...} to the batch's largest H and W with `fill`, then stacks.
at::Tensor pad_and_stack(const std::vector<at::Tensor>& parts, double fill) {
  std::vector<int64_t> largest = parts[0].sizes().vec();
  for (const auto& p : parts)
    for (int64_t d = 0; d < std::min<int64_t>(2, p.dim()); ++d) largest[d] = std::max(largest[d], p.size(d));
  std::vector<int64_t> batch_shape{static_cast<int64_t>(parts.size())};
  batch_shape.insert(batch_shape.end(), largest.begin(), largest.end());
  at::Tensor out = at::full(batch_shape, fill, parts[0].options());
  for (size_t k = 0; k < parts.size(); ++k) {
    at::Tensor row = out[static_cast<int64_t>(k)];
    for (int64_t d = 0; d < std::min<int64_t>(2, parts[k].dim()); ++d) row = row.narrow(d, 0, parts[k].size(d));
    row.copy_(parts[k]);
  }
  return out;
}

}  // namespace

const char* kind_name(FieldKind kind) {
  switch (kind) {
    case FieldKind::dense:
      return "dense";
    case FieldKind::ragged:
      return "ragged";
    case FieldKind::meta:
      return "meta";
  }
  return "?";
}

Fields collate_fields(const std::vector<Fields>& samples, const std::vector<int64_t>& indices) {
  if (samples.empty() || samples.size() != indices.size())
    throw Error("trainyard::collate_fields: " + std::to_string(samples.size()) + " samples and " +
                std::to_string(indices.size()) + " indices");
  Fields out;
  for (const auto& [name, first] : samples[0]) {
    std::vector<at::Tensor> parts;
    parts.reserve(samples.size());
    for (size_t k = 0; k < samples.size(); ++k) {
      const auto it = samples[k].find(name);
      if (it == samples[k].end())
        throw ConfigError(pair(indices, 0, k) + " differ in fields: '" + name + "' is missing from the second",
                          "expected every sample of a dataset to carry the same fields", "");
      const Field& f = it->second;
      const at::Tensor& v = f.values;
      if (f.kind != first.kind || !v.defined() || v.scalar_type() != first.values.scalar_type() ||
          v.dim() != first.values.dim())
        throw ConfigError(
            pair(indices, 0, k) + " differ in field '" + name + "'",
            std::string("expected one kind, dtype and rank, got ") + kind_name(first.kind) + " " +
                std::string(c10::toString(first.values.scalar_type())) + " " + shape(first.values.sizes()) + " and " +
                kind_name(f.kind) + " " +
                (v.defined() ? std::string(c10::toString(v.scalar_type())) + " " + shape(v.sizes()) : "undefined"),
            "");
      // The dimensions that may differ between samples: a ragged field's rows, a dense field's H and W.
      const int64_t free = f.kind == FieldKind::meta ? 0 : f.kind == FieldKind::ragged ? 1 : 2;
      if (v.dim() < free || v.sizes().slice(free) != first.values.sizes().slice(free))
        throw ConfigError(pair(indices, 0, k) + " differ in the shape of " + kind_name(f.kind) + " field '" + name +
                              "': " + shape(first.values.sizes()) + " and " + shape(v.sizes()),
                          f.kind == FieldKind::meta     ? "expected one shape in every sample"
                          : f.kind == FieldKind::ragged ? "expected rows of one shape ({n, ...}, n free)"
                                                        : "expected {H, W, ...} with one shape after H and W",
                          "");
      parts.push_back(v);
    }
    Field collated{first.kind, {}, {}, first.fill};
    if (first.kind == FieldKind::meta) {
      collated.values = at::stack(parts);
    } else if (first.kind == FieldKind::ragged) {
      std::vector<int64_t> counts;
      counts.reserve(parts.size());
      for (const auto& p : parts) counts.push_back(p.size(0));
      collated.values = at::cat(parts);
      collated.counts = at::tensor(counts, at::kLong);
    } else {
      collated.values = pad_and_stack(parts, first.fill);
    }
    out.emplace(name, std::move(collated));
  }
  for (size_t k = 1; k < samples.size(); ++k)
    if (samples[k].size() != samples[0].size())
      throw ConfigError(pair(indices, 0, k) + " differ in fields: the second has " + std::to_string(samples[k].size()) +
                            ", the first " + std::to_string(samples[0].size()),
                        "expected every sample of a dataset to carry the same fields", "");
  return out;
}

FieldBatch collate(std::vector<FieldExample> samples, std::vector<int64_t> indices) {
  if (samples.empty() || samples.size() != indices.size())
    throw Error("trainyard::collate: " + std::to_string(samples.size()) + " samples and " +
                std::to_string(indices.size()) + " indices");
  FieldBatch out;
  out.batch.input = stack_part(samples, indices, true);
  out.batch.target = stack_part(samples, indices, false);
  std::vector<Fields> fields;
  fields.reserve(samples.size());
  for (auto& s : samples) fields.push_back(std::move(s.fields));
  out.fields = collate_fields(fields, indices);
  out.batch.indices = std::move(indices);
  return out;
}

at::Tensor sample_values(const Field& field, int64_t k) {
  if (field.kind != FieldKind::ragged) return field.values[k];
  const at::Tensor counts = field.counts.to(at::kCPU);
  const int64_t* c = counts.const_data_ptr<int64_t>();
  int64_t first = 0;
  for (int64_t i = 0; i < k; ++i) first += c[i];
  return field.values.narrow(0, first, c[k]);
}

at::Tensor map_boxes(const at::Tensor& boxes, const at::Tensor& affine) {
  const at::Tensor b = boxes.to(at::kDouble).reshape({-1, 4});
  const at::Tensor a = affine.to(b.device(), at::kDouble);
  // The four corners (x1, y1), (x2, y1), (x1, y2), (x2, y2) as homogeneous rows.
  const at::Tensor xs = at::stack({b.select(1, 0), b.select(1, 2), b.select(1, 0), b.select(1, 2)}, 1);
  const at::Tensor ys = at::stack({b.select(1, 1), b.select(1, 1), b.select(1, 3), b.select(1, 3)}, 1);
  const at::Tensor px = xs * a[0][0] + ys * a[0][1] + a[0][2], py = xs * a[1][0] + ys * a[1][1] + a[1][2];
  return at::stack({std::get<0>(px.min(1)), std::get<0>(py.min(1)), std::get<0>(px.max(1)), std::get<0>(py.max(1))}, 1);
}

at::Tensor boxes_to_original(const at::Tensor& boxes, const at::Tensor& input_from_original) {
  const at::Tensor a = input_from_original.to(at::kCPU, at::kDouble).contiguous();
  const double* m = a.const_data_ptr<double>();
  // [A | t]^-1 = [A^-1 | -A^-1 t]
  const double det = m[0] * m[4] - m[1] * m[3];
  if (det == 0 || !std::isfinite(det))
    throw Error("trainyard::boxes_to_original: input_from_original cannot be inverted (determinant " +
                std::to_string(det) + ")");
  const double i00 = m[4] / det, i01 = -m[1] / det, i10 = -m[3] / det, i11 = m[0] / det;
  const at::Tensor inverse =
      at::tensor({i00, i01, -(i00 * m[2] + i01 * m[5]), i10, i11, -(i10 * m[2] + i11 * m[5])}, at::kDouble)
          .view({2, 3});
  return map_boxes(boxes, inverse);
}

FieldDataset::~FieldDataset() = default;
Detector::~Detector() = default;
FieldLoss::~FieldLoss() = default;
FieldMeter::~FieldMeter() = default;
AnnotationIds::~AnnotationIds() = default;

FieldBatch FieldDataset::get_batch_with_fields(const std::vector<int64_t>& indices,
                                               const std::vector<uint64_t>& seeds) const {
  std::vector<FieldExample> samples;
  samples.reserve(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) samples.push_back(get_with_fields(indices[k], seeds[k]));
  return collate(std::move(samples), indices);
}

}  // namespace trainyard
