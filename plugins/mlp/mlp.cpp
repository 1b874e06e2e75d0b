// A multi-layer perceptron sized from the dataset: flattened input, hidden
// layers with an activation and dropout, a linear classifier.
#include "mlp.h"

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/activation.h>
#include <trainyard/error.h>

namespace mlp {
namespace {

class Mlp : public trainyard::Network {
 public:
  Mlp(const trainyard::Options& o, const trainyard::Context& c) {
    if (c.dataset.num_classes <= 0)
      throw trainyard::ConfigError("the dataset reports no classes",
                                   "expected a classification dataset, got num_classes 0", "");
    int64_t width = c.dataset.sample_numel();
    const auto& activation = o.get<std::string>("activation");
    const double dropout = o.get<double>("dropout");
    // Layers are appended one by one so that a seed gives the same weights on every build.
    for (int64_t hidden : o.get<std::vector<int64_t>>("hidden_sizes")) {
      layers_->push_back(torch::nn::Linear(width, hidden));
      if (activation == "relu") layers_->push_back(torch::nn::ReLU());
      if (activation == "tanh") layers_->push_back(torch::nn::Tanh());
      if (activation == "gelu") layers_->push_back(torch::nn::GELU());
      if (activation == "sigmoid") layers_->push_back(torch::nn::Sigmoid());
      if (dropout > 0) layers_->push_back(torch::nn::Dropout(dropout));
      width = hidden;
    }
    layers_->push_back(torch::nn::Linear(width, c.dataset.num_classes));
    register_module("layers", layers_);
  }
  at::Tensor forward(const trainyard::Batch& batch) override { return layers_->forward(batch.input.flatten(1)); }

 private:
  torch::nn::Sequential layers_;
};

}  // namespace

trainyard::Schema schema() {
  trainyard::Schema s;
  s.add("hidden_sizes", std::vector<int64_t>{256, 128}, "width of each hidden layer (empty: a linear model)").min(1);
  s.add("activation", "relu", "activation after each hidden layer").one_of({"relu", "tanh", "gelu", "sigmoid"});
  s.add("dropout", 0.0, "dropout probability after each hidden layer").range(0.0, 0.99);
  return s;
}

std::shared_ptr<trainyard::Network> make(const trainyard::Options& options, const trainyard::Context& context) {
  return std::make_shared<Mlp>(options, context);
}

}  // namespace mlp
