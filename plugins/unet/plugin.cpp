// unet: a U-Net for semantic segmentation.
#include <trainyard/plugin.h>

#include "unet.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_network("unet",
                "U-Net (Ronneberger et al. 2015): an encoder of depth poolings, a decoder that upsamples back with "
                "skip connections; class scores per pixel [B, num_classes, H, W]",
                unet::schema(), unet::make);
}

}  // namespace

TRAINYARD_PLUGIN("unet", "1.1.0", "U-Net segmentation network", register_components)
