// Softmax cross-entropy over class logits, with optional label smoothing.
#include "cross_entropy.h"

#include <torch/nn/functional/loss.h>

namespace cross_entropy {
namespace {

class CrossEntropy : public trainyard::Loss {
 public:
  explicit CrossEntropy(const trainyard::Options& o)
      : options_(torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(o.get<double>("label_smoothing"))) {}
  at::Tensor compute(const at::Tensor& output, const trainyard::Batch& batch) override {
    return torch::nn::functional::cross_entropy(output, batch.target, options_);
  }

 private:
  torch::nn::functional::CrossEntropyFuncOptions options_;
};

}  // namespace

trainyard::Schema schema() {
  trainyard::Schema s;
  s.add("label_smoothing", 0.0, "mix the one-hot target with a uniform distribution by this much").range(0.0, 1.0);
  return s;
}

std::shared_ptr<trainyard::Loss> make(const trainyard::Options& options) {
  return std::make_shared<CrossEntropy>(options);
}

}  // namespace cross_entropy
