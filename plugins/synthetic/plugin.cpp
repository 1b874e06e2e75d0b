// synthetic: random, learnable classification data for tests and benchmarks.
#include <trainyard/plugin.h>

#include "synthetic.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_dataset("synthetic", "random classification data: class prototypes plus Gaussian noise", synthetic::schema(),
                [](const trainyard::Options& o, const trainyard::Context&) { return synthetic::make(o); });
}

}  // namespace

TRAINYARD_PLUGIN("synthetic", "1.0.0", "synthetic classification data", register_components)
