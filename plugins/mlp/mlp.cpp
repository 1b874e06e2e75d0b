// A multi-layer perceptron sized from the dataset: flattened input, hidden
// layers with an activation and dropout, a linear classifier (or an
// embedding layer, optionally L2-normalized, for metric learning).
#include "mlp.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <trainyard/embedding_head.h>
#include <trainyard/error.h>

namespace mlp {
namespace {

// The options, bound to the schema below: no key is read by string.
struct MlpOptions : trainyard::EmbeddingHead {
  std::vector<int64_t> hidden_sizes;
  std::string activation;
  double dropout = 0;
};

const trainyard::TypedSchema<MlpOptions>& typed_schema() {
  static const trainyard::TypedSchema<MlpOptions> s = [] {
    trainyard::TypedSchema<MlpOptions> t;
    t.add("hidden_sizes", &MlpOptions::hidden_sizes, {256, 128}, "width of each hidden layer (empty: a linear model)")
        .min(1);
    t.add("activation", &MlpOptions::activation, "relu", "activation after each hidden layer")
        .one_of({"relu", "tanh", "gelu", "sigmoid"});
    t.add("dropout", &MlpOptions::dropout, 0.0, "dropout probability after each hidden layer").range(0.0, 0.99);
    trainyard::EmbeddingHead::add_options(t);  // embedding_size, normalize
    return t;
  }();
  return s;
}

class Mlp : public trainyard::Network, public trainyard::NetworkOutputs {
 public:
  Mlp(const MlpOptions& o, const trainyard::Context& c) : head_(o) {
    if (c.dataset.num_classes <= 0)
      throw trainyard::ConfigError("the dataset reports no classes",
                                   "expected a classification dataset, got num_classes 0", "");
    int64_t width = c.dataset.sample_numel();
    // Layers are appended one by one so that a seed gives the same weights on every build.
    for (int64_t hidden : o.hidden_sizes) {
      layers_->push_back(torch::nn::Linear(width, hidden));
      if (o.activation == "relu") layers_->push_back(torch::nn::ReLU());
      if (o.activation == "tanh") layers_->push_back(torch::nn::Tanh());
      if (o.activation == "gelu") layers_->push_back(torch::nn::GELU());
      if (o.activation == "sigmoid") layers_->push_back(torch::nn::Sigmoid());
      if (o.dropout > 0) layers_->push_back(torch::nn::Dropout(o.dropout));
      width = hidden;
    }
    layers_->push_back(torch::nn::Linear(width, head_.outputs(c.dataset.num_classes)));
    register_module("layers", layers_);
  }
  at::Tensor forward(const trainyard::Batch& batch) override {
    return head_.apply(layers_->forward(batch.input.flatten(1)));
  }
  trainyard::OutputKind output_kind() const override { return head_.kind(); }

 private:
  trainyard::EmbeddingHead head_;
  torch::nn::Sequential layers_;
};

}  // namespace

trainyard::Schema schema() { return typed_schema().schema(); }

std::shared_ptr<trainyard::Network> make(const trainyard::Options& options, const trainyard::Context& context) {
  return std::make_shared<Mlp>(typed_schema().bind(options), context);
}

}  // namespace mlp
