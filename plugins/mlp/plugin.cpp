// mlp: a multi-layer perceptron.
#include <trainyard/plugin.h>

#include "mlp.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_network("mlp", "multi-layer perceptron over the flattened input", mlp::schema(), mlp::make);
}

}  // namespace

TRAINYARD_PLUGIN("mlp", "1.0.0", "multi-layer perceptron", register_components)
