// example_meter: a meter with a structured result. per_class_accuracy
// reports one number (the worst class's accuracy) and, as a table, each
// class's accuracy; after each test pass the host writes the table to
// RUN_DIR/meters/per_class_accuracy-e<epoch>.csv.
//
// State lives in accumulators (per class: correct, seen), sums that the host
// adds up over ranks and keeps in checkpoints; values() and results() are
// derived from them only.
//
// Experiment:
//   meters: [{plugin: per_class_accuracy, phases: [test]}]
#include <ATen/ATen.h>
#include <trainyard/error.h>
#include <trainyard/meter.h>
#include <trainyard/plugin.h>

namespace {

class PerClassAccuracy : public trainyard::Meter {
 public:
  PerClassAccuracy(int64_t classes, std::vector<std::string> names)
      : classes_(classes), names_(std::move(names)), sums_(static_cast<size_t>(2 * classes), 0.0) {
    names_.resize(static_cast<size_t>(classes));
    for (int64_t c = 0; c < classes; ++c)
      if (names_[static_cast<size_t>(c)].empty()) names_[static_cast<size_t>(c)] = std::to_string(c);
  }
  void reset() override { std::fill(sums_.begin(), sums_.end(), 0.0); }
  void update(const trainyard::MeterInput& in) override {
    at::Tensor target = in.batch.target.to(at::kLong).view({-1}).clamp(0, classes_ - 1).cpu();
    at::Tensor correct = in.output.argmax(1).cpu().eq(target).to(at::kLong);
    at::Tensor hits = at::bincount(target, correct, classes_).to(at::kDouble);
    at::Tensor seen = at::bincount(target, {}, classes_).to(at::kDouble);
    auto h = hits.accessor<double, 1>();
    auto s = seen.accessor<double, 1>();
    for (int64_t c = 0; c < classes_; ++c) sums_[2 * c] += h[c], sums_[2 * c + 1] += s[c];
  }
  std::vector<double> accumulators() const override { return sums_; }
  void set_accumulators(const std::vector<double>& a) override {
    if (a.size() != sums_.size()) throw std::invalid_argument("per_class_accuracy: wrong number of accumulators");
    sums_ = a;
  }
  std::map<std::string, double> values() const override {
    double worst = 2;
    for (int64_t c = 0; c < classes_; ++c)
      if (seen(c) > 0) worst = std::min(worst, accuracy(c));
    if (worst > 1) return {};
    return {{"worst_class_accuracy", worst}};
  }
  std::vector<trainyard::MeterResult> results() const override {
    trainyard::MeterResult table;
    table.name = "per_class_accuracy";
    table.columns = {"class", "samples", "accuracy"};
    for (int64_t c = 0; c < classes_; ++c)
      table.rows.push_back(
          {names_[static_cast<size_t>(c)], std::to_string(static_cast<int64_t>(seen(c))), std::to_string(accuracy(c))});
    return {table};
  }

 private:
  double seen(int64_t c) const { return sums_[static_cast<size_t>(2 * c + 1)]; }
  double accuracy(int64_t c) const { return seen(c) > 0 ? sums_[static_cast<size_t>(2 * c)] / seen(c) : 0.0; }
  int64_t classes_;
  std::vector<std::string> names_;
  std::vector<double> sums_;  ///< per class: correct, seen
};

void register_components(trainyard::Registrar& r) {
  r.add_meter(
      "per_class_accuracy", "accuracy of each class (reports: worst_class_accuracy; results: per_class_accuracy table)",
      trainyard::Schema(), [](const trainyard::Options&, const trainyard::Context& c) {
        if (c.dataset.num_classes <= 0)
          throw trainyard::ConfigError("per_class_accuracy needs a classification dataset",
                                       "expected num_classes > 0, got " + std::to_string(c.dataset.num_classes), "");
        return std::make_shared<PerClassAccuracy>(c.dataset.num_classes, c.dataset.class_names);
      });
}

}  // namespace

TRAINYARD_PLUGIN("example_meter", "1.0.0", "example: a meter with a structured result", register_components)
