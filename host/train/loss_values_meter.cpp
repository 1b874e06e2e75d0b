#include "train/loss_values_meter.h"

#include <ATen/ATen.h>

#include "trainyard/error.h"

namespace trainyard::host {
namespace {

bool valid_value_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

class LossValuesMeter final : public Meter {
 public:
  // The names are fixed at construction (the SDK asks for them before the
  // first compute() too): the accumulators keep one length on every rank.
  LossValuesMeter(std::shared_ptr<Loss> loss, LossValues* values) : loss_(std::move(loss)), values_(values) {
    for (const auto& [name, value] : values_->last_values()) {
      if (!valid_value_name(name))
        throw Error("last_values(): value name '" + name + "'; expected lower-case letters, digits and '_'");
      names_.push_back(name);
    }
    start_.assign(names_.size(), 0.0);
  }

  void reset() override {
    sums_.reset();
    start_.assign(names_.size(), 0.0);
    count_ = 0;
  }
  void update(const MeterInput& in) override {
    if (names_.empty()) return;
    const std::map<std::string, at::Tensor> last = values_->last_values();
    if (last.size() != names_.size())
      throw Error("last_values(): " + std::to_string(last.size()) + " values, " + std::to_string(names_.size()) +
                  " before the first compute(); expected the same names every time");
    // One stack and one add on the loss's device: nothing is read back here.
    std::vector<at::Tensor> parts;
    for (const auto& name : names_) {
      auto it = last.find(name);
      if (it == last.end())
        throw Error("last_values(): no value '" + name + "' this time; expected the same names every time");
      if (!it->second.defined() || it->second.numel() != 1)
        throw Error("last_values(): '" + name + "' is not one number; expected a 0-dim tensor");
      parts.push_back(it->second.detach().reshape({}).to(at::kDouble));
    }
    const double n = static_cast<double>(in.batch.size());
    at::Tensor step = at::stack(parts).mul_(n);
    if (!sums_.defined()) sums_ = at::zeros_like(step);
    sums_.add_(step);
    count_ += n;
  }
  std::vector<double> accumulators() const override {
    std::vector<double> a = sums();
    a.push_back(count_);
    return a;
  }
  void set_accumulators(const std::vector<double>& a) override {
    if (a.empty()) throw Error("set_accumulators: none; expected the sums and a count");
    start_.assign(a.begin(), a.end() - 1);
    start_.resize(names_.size(), 0.0);
    count_ = a.back();
    sums_.reset();
  }
  std::map<std::string, double> values() const override {
    std::map<std::string, double> v;
    if (count_ == 0) return v;
    const std::vector<double> s = sums();
    for (size_t i = 0; i < names_.size() && i < s.size(); ++i) v[names_[i]] = s[i] / count_;
    return v;
  }

 private:
  std::vector<double> sums() const {
    std::vector<double> s = start_;
    if (!sums_.defined()) return s;
    const at::Tensor cpu = sums_.cpu();
    for (int64_t i = 0; i < cpu.numel() && i < static_cast<int64_t>(s.size()); ++i)
      s[static_cast<size_t>(i)] += cpu.data_ptr<double>()[i];
    return s;
  }

  std::shared_ptr<Loss> loss_;  ///< keeps the loss alive as long as this meter
  LossValues* values_;
  std::vector<std::string> names_;  ///< as last_values() named them before the first compute()
  at::Tensor sums_;                 ///< double {names} on the loss's device, since the last read
  std::vector<double> start_;       ///< one per name: set by set_accumulators (a resumed run), or 0
  double count_ = 0;
};

}  // namespace

std::shared_ptr<Meter> make_loss_values_meter(const std::shared_ptr<Loss>& loss, LossValues* values) {
  if (!values) return nullptr;
  return std::make_shared<LossValuesMeter>(loss, values);
}

}  // namespace trainyard::host
