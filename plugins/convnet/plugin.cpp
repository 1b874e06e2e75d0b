// convnet: a small convolutional classifier.
#include <trainyard/plugin.h>

#include "convnet.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_network("convnet", "convolution blocks with batch norm and pooling, then a classifier", convnet::schema(),
                convnet::make);
}

}  // namespace

TRAINYARD_PLUGIN("convnet", "1.0.0", "small convolutional network", register_components)
