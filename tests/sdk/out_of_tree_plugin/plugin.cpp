// A network from an outside team: a linear classifier whose logits are scaled
// by an option, and which reads a free-form key from `extra:`.
#include <torch/nn/modules/linear.h>
#include <trainyard/network.h>
#include <trainyard/plugin.h>

namespace {

class ScaledLinear : public trainyard::Network {
 public:
  ScaledLinear(const trainyard::Options& o, const trainyard::Context& c)
      : fc_(register_module("fc", torch::nn::Linear(c.dataset.sample_numel(), c.dataset.num_classes))),
        scale_(o.get<double>("scale") * c.extra.get_number("scaled_linear.boost", 1.0)) {}
  at::Tensor forward(const trainyard::Batch& b) override { return fc_(b.input.flatten(1)) * scale_; }

 private:
  torch::nn::Linear fc_;
  double scale_;
};

void register_components(trainyard::Registrar& r) {
  trainyard::Schema schema;
  schema.add("scale", 1.0, "multiplies the logits").min(0.0);
  r.add_network("scaled_linear", "a linear classifier with scaled logits", schema,
                [](const trainyard::Options& o, const trainyard::Context& c) {
                  return std::make_shared<ScaledLinear>(o, c);
                });
}

}  // namespace

TRAINYARD_PLUGIN("scaled_linear", "2.1.0", "an out-of-tree example network", register_components)
