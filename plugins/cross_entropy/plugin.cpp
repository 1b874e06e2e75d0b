// cross_entropy: classification loss.
#include <trainyard/plugin.h>

#include "cross_entropy.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_loss("cross_entropy",
             "softmax cross-entropy on class indices ([B, C] logits, or dense [B, C, H, W] against [B, H, W] ids), "
             "with ignore_index and class_weights",
             cross_entropy::schema(), cross_entropy::make);
}

}  // namespace

TRAINYARD_PLUGIN("cross_entropy", "1.1.0", "cross-entropy loss", register_components)
