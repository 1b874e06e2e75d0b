// example_network: a small network, a two-layer perceptron whose hidden
// width is an option. The smallest complete plugin: an options struct bound to
// its schema, a component class, a registration, the entry point.
//
// Experiment:
//   network: {plugin: two_layer, hidden: 32}
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <trainyard/error.h>
#include <trainyard/network.h>
#include <trainyard/plugin.h>

namespace {

// The options as a struct; the TypedSchema below binds each field to its key.
struct TwoLayerOptions {
  int64_t hidden = 0;
};

class TwoLayer : public trainyard::Network {
 public:
  TwoLayer(const TwoLayerOptions& o, const trainyard::Context& c)
      : hidden_(register_module("hidden", torch::nn::Linear(c.dataset.sample_numel(), o.hidden))),
        out_(register_module("out", torch::nn::Linear(o.hidden, c.dataset.num_classes))) {
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
  trainyard::TypedSchema<TwoLayerOptions> schema;
  schema.add("hidden", &TwoLayerOptions::hidden, 32, "width of the hidden layer").min(1);
  // The registrar and `trainyard describe` see schema.schema(); the factory
  // gets validated Options (defaults filled in) and binds them to the struct.
  r.add_network("two_layer", "a two-layer perceptron (trainyard example)", schema.schema(),
                [schema](const trainyard::Options& o, const trainyard::Context& c) {
                  return std::make_shared<TwoLayer>(schema.bind(o), c);
                });
}

}  // namespace

TRAINYARD_PLUGIN("example_network", "1.0.0", "example: a small network", register_components)
