// example_network: a small network, a two-layer perceptron whose hidden
// width is an option. The smallest complete plugin: a component class, its
// schema, a registration, the entry point.
//
// Experiment:
//   network: {plugin: two_layer, hidden: 32}
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <trainyard/error.h>
#include <trainyard/network.h>
#include <trainyard/plugin.h>

namespace {

class TwoLayer : public trainyard::Network {
 public:
  TwoLayer(const trainyard::Options& o, const trainyard::Context& c)
      : hidden_(register_module("hidden", torch::nn::Linear(c.dataset.sample_numel(), o.get<int64_t>("hidden")))),
        out_(register_module("out", torch::nn::Linear(o.get<int64_t>("hidden"), c.dataset.num_classes))) {
    if (c.dataset.num_classes <= 0)
      throw trainyard::ConfigError("two_layer needs a classification dataset",
                                   "expected num_classes > 0, got " + std::to_string(c.dataset.num_classes), "");
  }
  at::Tensor forward(const trainyard::Batch& batch) override {
    return out_(torch::relu(hidden_(batch.input.flatten(1))));
  }

 private:
  torch::nn::Linear hidden_, out_;
};

void register_components(trainyard::Registrar& r) {
  trainyard::Schema schema;
  schema.add("hidden", int64_t{32}, "width of the hidden layer").min(1);
  r.add_network("two_layer", "a two-layer perceptron (trainyard example)", schema,
                [](const trainyard::Options& o, const trainyard::Context& c) {
                  return std::make_shared<TwoLayer>(o, c);
                });
}

}  // namespace

TRAINYARD_PLUGIN("example_network", "1.0.0", "example: a small network", register_components)
