// Softmax cross-entropy over class logits, with optional label smoothing.
#include "cross_entropy.h"

#include <torch/nn/functional/loss.h>

namespace cross_entropy {
namespace {

struct CrossEntropyOptions {
  double label_smoothing = 0;
};

const trainyard::TypedSchema<CrossEntropyOptions>& typed_schema() {
  static const trainyard::TypedSchema<CrossEntropyOptions> s = [] {
    trainyard::TypedSchema<CrossEntropyOptions> t;
    t.add("label_smoothing", &CrossEntropyOptions::label_smoothing, 0.0,
          "mix the one-hot target with a uniform distribution by this much")
        .range(0.0, 1.0);
    return t;
  }();
  return s;
}

class CrossEntropy : public trainyard::Loss {
 public:
  explicit CrossEntropy(const CrossEntropyOptions& o)
      : options_(torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(o.label_smoothing)) {}
  at::Tensor compute(const at::Tensor& output, const trainyard::Batch& batch) override {
    return torch::nn::functional::cross_entropy(output, batch.target, options_);
  }

 private:
  torch::nn::functional::CrossEntropyFuncOptions options_;
};

}  // namespace

trainyard::Schema schema() { return typed_schema().schema(); }

std::shared_ptr<trainyard::Loss> make(const trainyard::Options& options) {
  return std::make_shared<CrossEntropy>(typed_schema().bind(options));
}

}  // namespace cross_entropy
