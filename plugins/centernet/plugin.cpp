// centernet: an anchor-free one-stage detector and its loss (issue 51).
#include <trainyard/plugin.h>

#include "centernet.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_network("centernet",
                "CenterNet (Zhou et al. 2019): class heatmaps, box size and offset on a stride-4 grid "
                "[B, num_classes + 4, H/4, W/4]; decodes its peaks (3x3 max pool, no NMS) into detections",
                centernet::network_schema(), centernet::make_network);
  r.add_loss("centernet_loss",
             "CenterNet's loss: focal loss on the heatmaps, L1 on size and offset at each object's centre; reads "
             "the batch's boxes (a detection dataset: coco with target: boxes)",
             centernet::loss_schema(), centernet::make_loss);
}

}  // namespace

TRAINYARD_PLUGIN("centernet", "1.0.0", "CenterNet detector and its loss", register_components)
