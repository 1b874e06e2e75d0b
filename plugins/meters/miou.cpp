// miou: mean intersection over union of class predictions (segmentation: a
// [B, C, H, W] output against [B, H, W] class ids; a [B, C] output against
// [B] labels works the same). One confusion matrix over the whole phase, so
// the value is the set's, not a mean of batches'; its cells add up across
// ranks. The mean is torchmetrics' MulticlassJaccardIndex(average="macro",
// ignore_index=...): classes that neither occur nor are predicted, and the
// ignored class, are left out of it.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <trainyard/error.h>

#include "meters.h"

namespace meters {
namespace {

struct MiouOptions {
  int64_t ignore_index = -100;
};

const trainyard::TypedSchema<MiouOptions>& miou_typed_schema() {
  static const trainyard::TypedSchema<MiouOptions> s = [] {
    trainyard::TypedSchema<MiouOptions> t;
    t.add("ignore_index", &MiouOptions::ignore_index, int64_t{-100},
          "targets of this value are left out (a mask's void label, e.g. 255; cross_entropy's default -100)");
    return t;
  }();
  return s;
}

std::string shape(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

class Miou : public trainyard::Meter {
 public:
  Miou(int64_t num_classes, std::vector<std::string> names, int64_t ignore_index)
      : n_(num_classes), ignore_(ignore_index), names_(std::move(names)), counts_(cells() + 1, 0.0) {
    names_.resize(static_cast<size_t>(n_));
    for (int64_t c = 0; c < n_; ++c)
      if (names_[static_cast<size_t>(c)].empty()) names_[static_cast<size_t>(c)] = std::to_string(c);
  }
  void reset() override {
    std::fill(counts_.begin(), counts_.end(), 0.0);
    pending_.reset();
  }
  void update(const trainyard::MeterInput& in) override {
    const at::Tensor& out = in.output;
    const at::Tensor& target = in.batch.target;
    // [B, C, d...] against [B, d...]: the class dimension is the output's second.
    bool fits = out.dim() == target.dim() + 1 && out.size(1) == n_;
    for (int64_t d = 0; fits && d < target.dim(); ++d) fits = target.size(d) == out.size(d == 0 ? 0 : d + 1);
    if (!fits)
      throw std::invalid_argument("expected an output [B, " + std::to_string(n_) +
                                  ", ...] whose other sizes are the target's; got output " + shape(out) +
                                  " and target " + shape(target));
    const at::Tensor predicted = out.argmax(1).reshape({-1}).to(at::kLong);
    const at::Tensor truth = target.reshape({-1}).to(at::kLong);
    const at::Tensor kept = truth.ne(ignore_);
    const at::Tensor valid = kept.logical_and(truth.ge(0)).logical_and(truth.lt(n_));
    // One weighted bincount over (true * n + predicted), invalid pixels at
    // weight 0: no boolean indexing, so nothing waits for a GPU here.
    const at::Tensor index = truth.clamp(0, n_ - 1) * n_ + predicted;
    at::Tensor counts = at::bincount(index, valid.to(at::kDouble), cells());
    counts = at::cat({counts, kept.logical_and(valid.logical_not()).sum().to(at::kDouble).reshape({1})});
    if (pending_.defined())
      pending_.add_(counts);
    else
      pending_ = counts;
  }
  std::vector<double> accumulators() const override {
    fold();
    return counts_;
  }
  void set_accumulators(const std::vector<double>& a) override {
    if (a.size() != counts_.size())
      throw std::invalid_argument("miou: " + std::to_string(a.size()) + " accumulators for " +
                                  std::to_string(counts_.size()));
    counts_ = a;
    pending_.reset();
  }
  std::map<std::string, double> values() const override {
    fold();
    if (const double bad = counts_.back(); bad > 0)
      throw std::invalid_argument(cell(bad) + " target labels were outside 0.." + std::to_string(n_ - 1) +
                                  " and not ignore_index " + std::to_string(ignore_) +
                                  " (set ignore_index to the mask's void label, or num_classes to cover them)");
    double sum = 0, weights = 0, hits = 0, total = 0;
    for (int64_t c = 0; c < n_; ++c) {
      const double inter = at(c, c), truth = row(c), predicted = column(c);
      hits += inter, total += truth;
      if (c == ignore_ || truth + predicted == 0) continue;  // neither occurs nor is predicted: left out
      sum += inter / (truth + predicted - inter), weights += 1;
    }
    if (total == 0) return {};
    return {{"miou", weights > 0 ? sum / weights : 0.0}, {"pixel_accuracy", hits / total}};
  }
  std::vector<trainyard::MeterResult> results() const override {
    trainyard::MeterResult table;
    table.name = "iou_per_class";
    table.columns = {"class", "iou", "true", "predicted", "intersection"};
    for (int64_t c = 0; c < n_; ++c) {
      const double inter = at(c, c), truth = row(c), predicted = column(c);
      const double u = truth + predicted - inter;
      table.rows.push_back(
          {names_[static_cast<size_t>(c)], u > 0 ? cell(inter / u) : "", cell(truth), cell(predicted), cell(inter)});
    }
    return {table};
  }

 private:
  int64_t cells() const { return n_ * n_; }
  void fold() const {
    if (!pending_.defined()) return;
    const at::Tensor counts = pending_.cpu();
    const double* v = counts.const_data_ptr<double>();
    for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += v[i];
    pending_.reset();
  }
  double at(int64_t truth, int64_t predicted) const {
    fold();
    return counts_[static_cast<size_t>(truth * n_ + predicted)];
  }
  double row(int64_t truth) const {
    double s = 0;
    for (int64_t p = 0; p < n_; ++p) s += at(truth, p);
    return s;
  }
  double column(int64_t predicted) const {
    double s = 0;
    for (int64_t t = 0; t < n_; ++t) s += at(t, predicted);
    return s;
  }
  int64_t n_, ignore_;
  std::vector<std::string> names_;
  /// counts_[true * n + predicted], then the count of labels out of range
  /// (whole numbers: exact in double up to 2^53 pixels).
  mutable std::vector<double> counts_;
  mutable at::Tensor pending_;  ///< double {n * n + 1} on the output's device, not yet in counts_
};

}  // namespace

trainyard::Schema miou_schema() { return miou_typed_schema().schema(); }

std::shared_ptr<trainyard::Meter> make_miou(const trainyard::Options& options, const trainyard::Context& context) {
  const auto& d = context.dataset;
  if (d.num_classes <= 0)
    throw trainyard::ConfigError(
        "the training dataset reports no classes",
        "expected a dataset with num_classes > 0 (a mask's class count), got " + std::to_string(d.num_classes), "");
  return std::make_shared<Miou>(d.num_classes, d.class_names, miou_typed_schema().bind(options).ignore_index);
}

}  // namespace meters
