#include "data/batch_fields.h"

#include <ATen/ATen.h>

#include "util/json.h"
#include "util/shape.h"

namespace trainyard::host {

void FieldsBeside::hand_out(const Batch& batch, Fields fields) {
  input_ = batch.input;
  fields_ = std::move(fields);
}

const Fields& FieldsBeside::of(const Batch& batch) const {
  static const Fields none;
  return input_.defined() && batch.input.is_same(input_) ? fields_ : none;
}

namespace {

// Where a ragged field's row is: its sample, and its place among that
// sample's rows ("box 2" counts from the sample's first row).
struct RowPlace {
  int64_t sample = -1, row = 0;
};
RowPlace place_of_row(const at::Tensor& counts, int64_t row) {
  const at::Tensor c = counts.to(at::kCPU).contiguous();
  const int64_t* p = c.const_data_ptr<int64_t>();
  for (int64_t k = 0; k < c.numel(); row -= p[k], ++k)
    if (row < p[k]) return {k, row};
  return {};
}

std::string row_text(const at::Tensor& row) {
  const at::Tensor r = row.to(at::kCPU, at::kDouble).contiguous();
  std::string s = "(";
  for (int64_t i = 0; i < r.numel(); ++i) s += (i ? ", " : "") + json_number(r.const_data_ptr<double>()[i]);
  return s + ")";
}

std::optional<FieldProblem> shape_problem(const std::string& name, const Field& f, int64_t rows) {
  const std::string label = std::string(kind_name(f.kind)) + " field '" + name + "'";
  if (!f.values.defined()) return FieldProblem{-1, label + " has no values"};
  if (f.kind != FieldKind::ragged) {
    if (f.values.dim() == 0 || f.values.size(0) != rows)
      return FieldProblem{
          -1, label + " is " + shape_text(f.values.sizes()) + "; expected one row per sample, " + std::to_string(rows)};
    return std::nullopt;
  }
  const at::Tensor& c = f.counts;
  if (!c.defined() || c.scalar_type() != at::kLong || c.dim() != 1 || c.size(0) != rows)
    return FieldProblem{-1, label + " has counts " + (c.defined() ? shape_text(c.sizes()) : "undefined") +
                                "; expected int64 counts, one per sample: " + std::to_string(rows)};
  if (f.values.dim() == 0) return FieldProblem{-1, label + " is a scalar; expected rows {n, ...}"};
  const at::Tensor counts = c.to(at::kCPU);
  if (counts.lt(0).any().item<bool>() || counts.sum().item<int64_t>() != f.values.size(0))
    return FieldProblem{-1, label + "'s counts add up to " + std::to_string(counts.sum().item<int64_t>()) +
                                "; expected its rows, " + std::to_string(f.values.size(0)) + ", none negative"};
  return std::nullopt;
}

// A ragged well-known field whose rows must pair with the boxes'.
std::optional<FieldProblem> paired_with_boxes(const Fields& fields, const std::string& name, const Field& f) {
  const auto boxes = fields.find(field_name::boxes);
  if (boxes == fields.end() || f.kind != FieldKind::ragged || boxes->second.kind != FieldKind::ragged)
    return std::nullopt;
  if (!f.counts.to(at::kCPU).equal(boxes->second.counts.to(at::kCPU))) {
    const at::Tensor differ = f.counts.to(at::kCPU).ne(boxes->second.counts.to(at::kCPU)).nonzero();
    const int64_t k = differ.numel() ? differ[0][0].item<int64_t>() : -1;
    return FieldProblem{
        k, "'" + name + "' has " + std::to_string(f.counts.to(at::kCPU)[k].item<int64_t>()) + " rows and 'boxes' " +
               std::to_string(boxes->second.counts.to(at::kCPU)[k].item<int64_t>()) + "; expected one per box"};
  }
  return std::nullopt;
}

std::optional<FieldProblem> boxes_problem(const Field& f, const at::Tensor& input) {
  const at::Tensor& v = f.values;
  if (f.kind != FieldKind::ragged || !at::isFloatingType(v.scalar_type()) || v.dim() != 2 || v.size(1) != 4)
    return FieldProblem{-1, std::string("'boxes' is ") + kind_name(f.kind) + " " + c10::toString(v.scalar_type()) +
                                " " + shape_text(v.sizes()) + "; expected ragged floating-point rows {n, 4}"};
  if (v.size(0) == 0) return std::nullopt;
  const at::Tensor b = v.to(at::kCPU, at::kDouble);
  const at::Tensor x1 = b.select(1, 0), y1 = b.select(1, 1), x2 = b.select(1, 2), y2 = b.select(1, 3);
  constexpr double kSlack = 1e-3;  // rounding of a box clipped to the border
  at::Tensor bad = b.isfinite().all(1).logical_not() | (x2 <= x1) | (y2 <= y1);
  std::string bounds;
  if (input.dim() >= 3) {
    const double height = static_cast<double>(input.size(-2)), width = static_cast<double>(input.size(-1));
    bad = bad | (x1 < -kSlack) | (y1 < -kSlack) | (x2 > width + kSlack) | (y2 > height + kSlack);
    bounds = " inside the input's " + std::to_string(input.size(-2)) + "x" + std::to_string(input.size(-1));
  }
  const at::Tensor rows = bad.nonzero();
  if (rows.numel() == 0) return std::nullopt;
  const int64_t row = rows[0][0].item<int64_t>();
  const RowPlace place = place_of_row(f.counts, row);
  return FieldProblem{place.sample, "box " + std::to_string(place.row) + " is " + row_text(b[row]) +
                                        "; expected finite (x1, y1, x2, y2) with x1 < x2 and y1 < y2" + bounds};
}

std::optional<FieldProblem> labels_problem(const Field& f, int64_t num_classes) {
  const at::Tensor& v = f.values;
  if (f.kind != FieldKind::ragged || at::isFloatingType(v.scalar_type()) || v.dim() != 1)
    return FieldProblem{-1, std::string("'box_labels' is ") + kind_name(f.kind) + " " + c10::toString(v.scalar_type()) +
                                " " + shape_text(v.sizes()) + "; expected ragged integer rows {n}"};
  if (num_classes <= 0 || v.numel() == 0) return std::nullopt;
  const at::Tensor l = v.to(at::kCPU, at::kLong);
  const at::Tensor rows = ((l < 0) | (l >= num_classes)).nonzero();
  if (rows.numel() == 0) return std::nullopt;
  const int64_t row = rows[0][0].item<int64_t>();
  const RowPlace place = place_of_row(f.counts, row);
  return FieldProblem{place.sample, "box " + std::to_string(place.row) + " has label " +
                                        std::to_string(l[row].item<int64_t>()) + "; expected a class from 0 to " +
                                        std::to_string(num_classes - 1)};
}

std::optional<FieldProblem> meta_problem(const std::string& name, const Field& f, at::IntArrayRef row_shape,
                                         bool floating) {
  const at::Tensor& v = f.values;
  if (f.kind != FieldKind::meta || v.sizes().slice(1) != row_shape || at::isFloatingType(v.scalar_type()) != floating)
    return FieldProblem{-1, "'" + name + "' is " + kind_name(f.kind) + " " + c10::toString(v.scalar_type()) + " " +
                                shape_text(v.sizes().slice(1)) + " per sample; expected meta " +
                                (floating ? "floating-point " : "integer ") + shape_text(row_shape)};
  const at::Tensor d = v.to(at::kCPU, at::kDouble).reshape({v.size(0), -1});
  const at::Tensor bad = floating ? d.isfinite().all(1).logical_not() : (d <= 0).any(1);
  const at::Tensor rows = bad.nonzero();
  if (rows.numel() == 0 || name == field_name::image_id) return std::nullopt;
  const int64_t k = rows[0][0].item<int64_t>();
  return FieldProblem{
      k, "'" + name + "' is " + row_text(d[k]) + "; expected " + (floating ? "finite values" : "sizes of 1 or more")};
}

}  // namespace

std::optional<FieldProblem> first_field_problem(const Fields& fields, const at::Tensor& input, int64_t rows,
                                                const DatasetInfo& info) {
  for (const auto& [name, f] : fields)
    if (auto p = shape_problem(name, f, rows)) return p;
  for (const auto& [name, f] : fields) {
    std::optional<FieldProblem> p;
    if (name == field_name::boxes) p = boxes_problem(f, input);
    if (name == field_name::box_labels) p = labels_problem(f, info.num_classes);
    if (name == field_name::box_labels || name == field_name::box_crowd) {
      if (!p) p = paired_with_boxes(fields, name, f);
    }
    if (name == field_name::original_size) p = meta_problem(name, f, {2}, false);
    if (name == field_name::input_from_original) p = meta_problem(name, f, {2, 3}, true);
    if (name == field_name::image_id) p = meta_problem(name, f, {}, false);
    if (p) return p;
  }
  return std::nullopt;
}

}  // namespace trainyard::host
