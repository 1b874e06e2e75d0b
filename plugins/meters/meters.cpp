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

// The meters below sum on the device of the tensors they are given and read
// the sums back only when accumulators() or values() is asked for (the log
// interval, the epoch's end, a checkpoint): no device sync at every step.

class LossMeter : public trainyard::Meter {
 public:
  void reset() override {
    sum_.reset();
    start_ = count_ = 0;
  }
  void update(const trainyard::MeterInput& in) override {
    // The loss is a batch mean: weigh it by the batch size. Summed in double,
    // from where set_accumulators left it, in the order of the updates: a
    // resumed run adds exactly as the uninterrupted one.
    const double n = static_cast<double>(in.batch.size());
    if (!sum_.defined()) sum_ = at::full({}, start_, in.loss.options().dtype(at::kDouble));
    const at::Tensor& loss = in.loss;
    sum_.add_(loss.dim() == 0 ? loss.detach() : loss.detach().reshape({}), n);  // a {1} loss counts too
    count_ += n;
  }
  std::vector<double> accumulators() const override { return {sum(), count_}; }
  void set_accumulators(const std::vector<double>& a) override {
    sum_.reset();
    start_ = a.at(0), count_ = a.at(1);
  }
  std::map<std::string, double> values() const override {
    if (count_ == 0) return {};
    return {{"loss", sum() / count_}};
  }

 private:
  double sum() const { return sum_.defined() ? sum_.item<double>() : start_; }
  at::Tensor sum_;  ///< 0-dim double on the loss's device; undefined until the first update
  double start_ = 0, count_ = 0;
};

class TopkAccuracy : public trainyard::Meter {
 public:
  TopkAccuracy(std::vector<int64_t> ks, int64_t num_classes) : ks_(std::move(ks)), start_(ks_.size(), 0) {
    for (int64_t k : ks_)
      if (num_classes > 0 && k > num_classes)
        throw trainyard::ConfigError("k " + std::to_string(k) + " exceeds the number of classes",
                                     "expected k <= " + std::to_string(num_classes), "lower k");
    max_k_ = *std::max_element(ks_.begin(), ks_.end());
  }
  void reset() override {
    std::fill(start_.begin(), start_.end(), 0.0);
    hits_.reset();
    count_ = 0;
  }
  void update(const trainyard::MeterInput& in) override {
    const auto& out = in.output;
    const int64_t k = std::min<int64_t>(max_k_, out.size(1));
    // The k highest classes per sample ({batch, k}; argmax alone for top-1,
    // the cheapest kernel), then per rank j the samples whose target is
    // there, added to the running count on the device: few tensor
    // operations, since this runs at every step.
    const at::Tensor& target = in.batch.target;
    const at::Tensor at_rank =  // int64 {k}
        k == 1 ? out.argmax(1).eq(target.dim() == 1 ? target : target.view({-1})).sum(0, /*keepdim=*/true)
               : std::get<1>(out.topk(k, /*dim=*/1)).eq(target.view({-1, 1})).sum(0);
    if (!hits_.defined()) hits_ = at::zeros({max_k_}, at_rank.options());
    (k == max_k_ ? hits_ : hits_.narrow(0, 0, k)).add_(at_rank);
    count_ += static_cast<double>(out.size(0));
  }
  std::vector<double> accumulators() const override {
    std::vector<double> a = correct();
    a.push_back(count_);
    return a;
  }
  void set_accumulators(const std::vector<double>& a) override {
    if (a.size() != ks_.size() + 1) throw std::invalid_argument("topk_accuracy: wrong number of accumulators");
    start_.assign(a.begin(), a.end() - 1);
    hits_.reset();
    count_ = a.back();
  }
  std::map<std::string, double> values() const override {
    std::map<std::string, double> v;
    if (count_ == 0) return v;
    const std::vector<double> c = correct();
    for (size_t i = 0; i < ks_.size(); ++i) v["accuracy_top" + std::to_string(ks_[i])] = c[i] / count_;
    return v;
  }

 private:
  // Per k asked for: the samples whose target is within the top k (whole
  // numbers, exact in double: the sum from start_ does not depend on when
  // the device counts were read).
  std::vector<double> correct() const {
    std::vector<double> c = start_;
    if (!hits_.defined()) return c;
    const at::Tensor counts = hits_.cpu();
    auto hits = counts.accessor<int64_t, 1>();
    double within = 0;
    std::vector<double> within_rank(static_cast<size_t>(max_k_));  // hits within the top 1..j+1
    for (int64_t j = 0; j < max_k_; ++j) within_rank[static_cast<size_t>(j)] = within += static_cast<double>(hits[j]);
    for (size_t i = 0; i < ks_.size(); ++i) c[i] += within_rank[static_cast<size_t>(ks_[i] - 1)];
    return c;
  }

  std::vector<int64_t> ks_;
  int64_t max_k_ = 1;
  std::vector<double> start_;  ///< set by set_accumulators (a resumed run), or 0
  at::Tensor hits_;            ///< int64 {max_k} on the output's device: samples whose target ranked j+1
  double count_ = 0;
};

class ConfusionMatrix : public trainyard::Meter {
 public:
  ConfusionMatrix(int64_t num_classes, std::vector<std::string> names)
      : n_(num_classes), names_(std::move(names)), counts_(static_cast<size_t>(n_ * n_), 0.0) {
    names_.resize(static_cast<size_t>(n_));
    for (int64_t c = 0; c < n_; ++c)
      if (names_[static_cast<size_t>(c)].empty()) names_[static_cast<size_t>(c)] = std::to_string(c);
  }
  void reset() override {
    std::fill(counts_.begin(), counts_.end(), 0.0);
    cells_.reset();
  }
  void update(const trainyard::MeterInput& in) override {
    at::Tensor predicted = in.output.argmax(1).to(at::kLong);
    at::Tensor truth = in.batch.target.to(at::kLong).view({-1});
    // One bincount over (true * n + predicted): cell counts of this batch,
    // added up on the device until the counts are read.
    at::Tensor cells = at::bincount(truth.clamp(0, n_ - 1) * n_ + predicted.clamp(0, n_ - 1), {}, n_ * n_);
    if (cells_.defined())
      cells_.add_(cells);
    else
      cells_ = cells;
  }
  std::vector<double> accumulators() const override {
    fold();
    return counts_;
  }
  void set_accumulators(const std::vector<double>& a) override {
    if (a.size() != counts_.size()) throw std::invalid_argument("confusion_matrix: wrong number of accumulators");
    counts_ = a;
    cells_.reset();
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
  // Moves the device's counts into counts_ (whole numbers: exact in double).
  void fold() const {
    if (!cells_.defined()) return;
    const at::Tensor cells = cells_.cpu();
    auto a = cells.accessor<int64_t, 1>();
    for (int64_t i = 0; i < n_ * n_; ++i) counts_[static_cast<size_t>(i)] += static_cast<double>(a[i]);
    cells_.reset();
  }
  double at(int64_t truth, int64_t predicted) const {
    fold();
    return counts_[static_cast<size_t>(truth * n_ + predicted)];
  }
  double row_sum(int64_t truth) const {
    double s = 0;
    for (int64_t p = 0; p < n_; ++p) s += at(truth, p);
    return s;
  }
  int64_t n_;
  std::vector<std::string> names_;
  mutable std::vector<double> counts_;  ///< row-major: counts_[true * n + predicted]
  mutable at::Tensor cells_;            ///< int64 {n * n} on the output's device, not yet in counts_
};

struct TopkOptions {
  std::vector<int64_t> k;
};

const trainyard::TypedSchema<TopkOptions>& topk_typed_schema() {
  static const trainyard::TypedSchema<TopkOptions> s = [] {
    trainyard::TypedSchema<TopkOptions> t;
    t.add("k", &TopkOptions::k, {1}, "report accuracy_topK for each k").min(1);
    return t;
  }();
  return s;
}

}  // namespace

std::string cell(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, x == static_cast<double>(static_cast<int64_t>(x)) ? "%.0f" : "%.6g", x);
  return buffer;
}

trainyard::Schema confusion_schema() { return trainyard::Schema(); }

std::shared_ptr<trainyard::Meter> make_confusion(const trainyard::Options&, const trainyard::Context& context) {
  const auto& d = context.dataset;
  if (d.num_classes <= 0)
    throw trainyard::ConfigError(
        "the training dataset reports no classes",
        "expected a classification dataset (num_classes > 0), got " + std::to_string(d.num_classes),
        "use confusion_matrix with a dataset of classes only");
  return std::make_shared<ConfusionMatrix>(d.num_classes, d.class_names);
}

trainyard::Schema loss_schema() { return trainyard::Schema(); }

std::shared_ptr<trainyard::Meter> make_loss(const trainyard::Options&) { return std::make_shared<LossMeter>(); }

trainyard::Schema topk_schema() { return topk_typed_schema().schema(); }

std::shared_ptr<trainyard::Meter> make_topk(const trainyard::Options& options, const trainyard::Context& context) {
  std::vector<int64_t> ks = topk_typed_schema().bind(options).k;
  if (ks.empty()) throw trainyard::ConfigError("k is empty", "expected at least one k, e.g. [1, 5]", "");
  return std::make_shared<TopkAccuracy>(ks, context.dataset.num_classes);
}

}  // namespace meters
