// fashion_mnist: Zalando's Fashion-MNIST from its idx files.
#include <trainyard/plugin.h>

#include "fashion_mnist.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_dataset("fashion_mnist", "Zalando's Fashion-MNIST (28x28 grayscale, 10 classes) from idx files",
                fashion_mnist::schema(),
                [](const trainyard::Options& o, const trainyard::Context&) { return fashion_mnist::make(o); });
}

}  // namespace

TRAINYARD_PLUGIN("fashion_mnist", "1.0.0", "Fashion-MNIST dataset from idx files", register_components)
