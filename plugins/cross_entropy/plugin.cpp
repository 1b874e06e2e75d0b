// cross_entropy: classification loss.
#include <trainyard/plugin.h>

#include "cross_entropy.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_loss("cross_entropy", "softmax cross-entropy on class indices", cross_entropy::schema(),
             [](const trainyard::Options& o, const trainyard::Context&) { return cross_entropy::make(o); });
}

}  // namespace

TRAINYARD_PLUGIN("cross_entropy", "1.0.0", "cross-entropy loss", register_components)
