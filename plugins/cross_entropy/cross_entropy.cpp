// Softmax cross-entropy over class logits ([B, C], or dense [B, C, H, W]
// against [B, H, W] class ids: segmentation), with optional label smoothing,
// an ignored label value (a mask's void pixels) and per-class weights.
#include "cross_entropy.h"

#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <trainyard/error.h>

namespace cross_entropy {
namespace {

struct CrossEntropyOptions {
  double label_smoothing = 0;
  int64_t ignore_index = -100;
  std::vector<double> class_weights;
};

const trainyard::TypedSchema<CrossEntropyOptions>& typed_schema() {
  static const trainyard::TypedSchema<CrossEntropyOptions> s = [] {
    trainyard::TypedSchema<CrossEntropyOptions> t;
    t.add("label_smoothing", &CrossEntropyOptions::label_smoothing, 0.0,
          "mix the one-hot target with a uniform distribution by this much")
        .range(0.0, 1.0);
    t.add("ignore_index", &CrossEntropyOptions::ignore_index, int64_t{-100},
          "targets of this value add nothing to the loss or its mean (PyTorch's ignore_index; a mask's void "
          "label, e.g. 255)");
    t.add("class_weights", &CrossEntropyOptions::class_weights, {},
          "one weight per class, scaling its targets' losses (the mean is weighted too, as PyTorch's weight=); "
          "empty: all 1")
        .min(0.0);
    return t;
  }();
  return s;
}

class CrossEntropy : public trainyard::Loss {
 public:
  CrossEntropy(const CrossEntropyOptions& o, int64_t num_classes)
      : options_(torch::nn::functional::CrossEntropyFuncOptions()
                     .label_smoothing(o.label_smoothing)
                     .ignore_index(o.ignore_index)),
        weights_(o.class_weights) {
    if (!weights_.empty() && num_classes > 0 && static_cast<int64_t>(weights_.size()) != num_classes)
      throw trainyard::ConfigError("cross_entropy: class_weights has " + std::to_string(weights_.size()) +
                                       " values for " + std::to_string(num_classes) + " classes",
                                   "expected one weight per class, or none", "");
  }
  at::Tensor compute(const at::Tensor& output, const trainyard::Batch& batch) override {
    if (!weights_.empty()) {
      if (output.dim() < 2 || output.size(1) != static_cast<int64_t>(weights_.size()))
        throw std::invalid_argument(
            "class_weights has " + std::to_string(weights_.size()) + " values; the network's output has " +
            (output.dim() < 2 ? std::string("no class dimension") : std::to_string(output.size(1)) + " classes"));
      // Made once per device and dtype the output comes in.
      if (!weight_tensor_.defined() || weight_tensor_.device() != output.device() ||
          weight_tensor_.scalar_type() != output.scalar_type()) {
        weight_tensor_ = at::tensor(weights_, at::kDouble).to(output.device(), output.scalar_type());
        options_.weight(weight_tensor_);
      }
    }
    return torch::nn::functional::cross_entropy(output, batch.target, options_);
  }

 private:
  torch::nn::functional::CrossEntropyFuncOptions options_;
  std::vector<double> weights_;
  at::Tensor weight_tensor_;
};

}  // namespace

trainyard::Schema schema() { return typed_schema().schema(); }

std::shared_ptr<trainyard::Loss> make(const trainyard::Options& options, const trainyard::Context& context) {
  return std::make_shared<CrossEntropy>(typed_schema().bind(options), context.dataset.num_classes);
}

}  // namespace cross_entropy
