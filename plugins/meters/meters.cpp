// loss: the mean loss per sample over a phase.
// topk_accuracy: the fraction of samples whose target is among the k highest outputs.
// confusion_matrix: counts of (true class, predicted class); its structured
// results are the matrix and a per-class precision/recall/F1 table.
#include "meters.h"

#include <cstdio>

#include <ATen/ATen.h>
#include <trainyard/error.h>

namespace meters {
namespace {

class LossMeter : public trainyard::Meter {
 public:
  void reset() override { sum_ = count_ = 0; }
  void update(const trainyard::MeterInput& in) override {
    // The loss is a batch mean: weigh it by the batch size.
    const double n = static_cast<double>(in.batch.size());
    sum_ += in.loss.item<double>() * n;
    count_ += n;
  }
  std::vector<double> accumulators() const override { return {sum_, count_}; }
  void set_accumulators(const std::vector<double>& a) override { sum_ = a.at(0), count_ = a.at(1); }
  std::map<std::string, double> values() const override {
    if (count_ == 0) return {};
    return {{"loss", sum_ / count_}};
  }

 private:
  double sum_ = 0, count_ = 0;
};

class TopkAccuracy : public trainyard::Meter {
 public:
  TopkAccuracy(std::vector<int64_t> ks, int64_t num_classes) : ks_(std::move(ks)), correct_(ks_.size(), 0) {
    for (int64_t k : ks_)
      if (num_classes > 0 && k > num_classes)
        throw trainyard::ConfigError("k " + std::to_string(k) + " exceeds the number of classes",
                                     "expected k <= " + std::to_string(num_classes), "lower k");
    max_k_ = *std::max_element(ks_.begin(), ks_.end());
  }
  void reset() override {
    std::fill(correct_.begin(), correct_.end(), 0.0);
    count_ = 0;
  }
  void update(const trainyard::MeterInput& in) override {
    const auto& out = in.output;
    const int64_t k = std::min<int64_t>(max_k_, out.size(1));
    // The k highest classes per sample ({batch, k}; argmax alone for top-1,
    // the cheapest kernel), then per rank j the samples whose target is
    // there: few tensor operations, since this runs at every step.
    at::Tensor top = k == 1 ? out.argmax(1, /*keepdim=*/true) : std::get<1>(out.topk(k, /*dim=*/1));
    at::Tensor at_rank = top.eq(in.batch.target.view({-1, 1})).sum(0).cpu();  // int64 {k}
    auto hits = at_rank.accessor<int64_t, 1>();
    std::vector<double> within(static_cast<size_t>(k));  // hits within the top 1..k
    double running = 0;
    for (int64_t j = 0; j < k; ++j) within[static_cast<size_t>(j)] = running += static_cast<double>(hits[j]);
    for (size_t i = 0; i < ks_.size(); ++i) correct_[i] += within[static_cast<size_t>(std::min<int64_t>(ks_[i], k) - 1)];
    count_ += static_cast<double>(out.size(0));
  }
  std::vector<double> accumulators() const override {
    std::vector<double> a = correct_;
    a.push_back(count_);
    return a;
  }
  void set_accumulators(const std::vector<double>& a) override {
    if (a.size() != ks_.size() + 1) throw std::invalid_argument("topk_accuracy: wrong number of accumulators");
    correct_.assign(a.begin(), a.end() - 1);
    count_ = a.back();
  }
  std::map<std::string, double> values() const override {
    std::map<std::string, double> v;
    if (count_ == 0) return v;
    for (size_t i = 0; i < ks_.size(); ++i) v["accuracy_top" + std::to_string(ks_[i])] = correct_[i] / count_;
    return v;
  }

 private:
  std::vector<int64_t> ks_;
  int64_t max_k_ = 1;
  std::vector<double> correct_;
  double count_ = 0;
};

// Numbers in result tables: integers as such, others with 6 significant digits.
std::string cell(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, x == static_cast<double>(static_cast<int64_t>(x)) ? "%.0f" : "%.6g", x);
  return buffer;
}

class ConfusionMatrix : public trainyard::Meter {
 public:
  ConfusionMatrix(int64_t num_classes, std::vector<std::string> names)
      : n_(num_classes), names_(std::move(names)), counts_(static_cast<size_t>(n_ * n_), 0.0) {
    names_.resize(static_cast<size_t>(n_));
    for (int64_t c = 0; c < n_; ++c)
      if (names_[static_cast<size_t>(c)].empty()) names_[static_cast<size_t>(c)] = std::to_string(c);
  }
  void reset() override { std::fill(counts_.begin(), counts_.end(), 0.0); }
  void update(const trainyard::MeterInput& in) override {
    at::Tensor predicted = in.output.argmax(1).to(at::kLong).cpu();
    at::Tensor truth = in.batch.target.to(at::kLong).view({-1}).cpu();
    // One bincount over (true * n + predicted): cell counts of this batch.
    at::Tensor cells = at::bincount(truth.clamp(0, n_ - 1) * n_ + predicted.clamp(0, n_ - 1), {}, n_ * n_);
    auto a = cells.accessor<int64_t, 1>();
    for (int64_t i = 0; i < n_ * n_; ++i) counts_[static_cast<size_t>(i)] += static_cast<double>(a[i]);
  }
  std::vector<double> accumulators() const override { return counts_; }
  void set_accumulators(const std::vector<double>& a) override {
    if (a.size() != counts_.size()) throw std::invalid_argument("confusion_matrix: wrong number of accumulators");
    counts_ = a;
  }
  std::map<std::string, double> values() const override {
    double recall_sum = 0, classes = 0;
    for (int64_t t = 0; t < n_; ++t)
      if (const double support = row_sum(t); support > 0) recall_sum += at(t, t) / support, ++classes;
    if (classes == 0) return {};
    return {{"mean_class_recall", recall_sum / classes}};
  }
  std::vector<trainyard::MeterResult> results() const override {
    trainyard::MeterResult matrix;
    matrix.name = "confusion_matrix";
    matrix.columns = {"true/predicted"};
    matrix.columns.insert(matrix.columns.end(), names_.begin(), names_.end());
    trainyard::MeterResult report;
    report.name = "per_class";
    report.columns = {"class", "support", "precision", "recall", "f1"};
    for (int64_t t = 0; t < n_; ++t) {
      std::vector<std::string> row = {names_[static_cast<size_t>(t)]};
      for (int64_t p = 0; p < n_; ++p) row.push_back(cell(at(t, p)));
      matrix.rows.push_back(std::move(row));
      double predicted = 0;
      for (int64_t r = 0; r < n_; ++r) predicted += at(r, t);
      const double support = row_sum(t), hit = at(t, t);
      const double precision = predicted > 0 ? hit / predicted : 0, recall = support > 0 ? hit / support : 0;
      const double f1 = precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0;
      report.rows.push_back({names_[static_cast<size_t>(t)], cell(support), cell(precision), cell(recall), cell(f1)});
    }
    return {matrix, report};
  }

 private:
  double at(int64_t truth, int64_t predicted) const { return counts_[static_cast<size_t>(truth * n_ + predicted)]; }
  double row_sum(int64_t truth) const {
    double s = 0;
    for (int64_t p = 0; p < n_; ++p) s += at(truth, p);
    return s;
  }
  int64_t n_;
  std::vector<std::string> names_;
  std::vector<double> counts_;  ///< row-major: counts_[true * n + predicted]
};

}  // namespace

trainyard::Schema confusion_schema() { return trainyard::Schema(); }

std::shared_ptr<trainyard::Meter> make_confusion(const trainyard::Options&, const trainyard::Context& context) {
  const auto& d = context.dataset;
  if (d.num_classes <= 0)
    throw trainyard::ConfigError("the training dataset reports no classes",
                                 "expected a classification dataset (num_classes > 0), got " +
                                     std::to_string(d.num_classes),
                                 "use confusion_matrix with a dataset of classes only");
  return std::make_shared<ConfusionMatrix>(d.num_classes, d.class_names);
}

trainyard::Schema loss_schema() { return trainyard::Schema(); }

std::shared_ptr<trainyard::Meter> make_loss(const trainyard::Options&) { return std::make_shared<LossMeter>(); }

trainyard::Schema topk_schema() {
  trainyard::Schema s;
  s.add("k", std::vector<int64_t>{1}, "report accuracy_topK for each k").min(1);
  return s;
}

std::shared_ptr<trainyard::Meter> make_topk(const trainyard::Options& options, const trainyard::Context& context) {
  auto ks = options.get<std::vector<int64_t>>("k");
  if (ks.empty()) throw trainyard::ConfigError("k is empty", "expected at least one k, e.g. [1, 5]", "");
  return std::make_shared<TopkAccuracy>(ks, context.dataset.num_classes);
}

}  // namespace meters
