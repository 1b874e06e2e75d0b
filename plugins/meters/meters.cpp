// loss: the mean loss per sample over a phase.
// topk_accuracy: the fraction of samples whose target is among the k highest outputs.
#include "meters.h"

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

}  // namespace

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
