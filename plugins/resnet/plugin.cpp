// resnet: residual networks, ImageNet-style (18-152) and CIFAR-style (6n+2).
#include <trainyard/plugin.h>

#include "resnet.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_network("resnet",
                "residual network: depth 18/34/50/101/152 (ImageNet-style, basic or bottleneck blocks) or "
                "20/32/44/56/110 (CIFAR-style); batch norm settings from the options",
                resnet::schema(), resnet::make);
}

}  // namespace

TRAINYARD_PLUGIN("resnet", "1.0.0", "residual networks (He et al. 2015)", register_components)
