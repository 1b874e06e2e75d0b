// synthetic: random, learnable classification and segmentation data for tests and benchmarks.
#include <trainyard/plugin.h>

#include "synthetic.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_dataset("synthetic", "random classification data: class prototypes plus Gaussian noise", synthetic::schema(),
                [](const trainyard::Options& o, const trainyard::Context&) { return synthetic::make(o); });
  r.add_dataset("synthetic_shapes",
                "random segmentation data: rectangles of each class on a noisy background, with their masks",
                synthetic::shapes_schema(),
                [](const trainyard::Options& o, const trainyard::Context&) { return synthetic::make_shapes(o); });
}

}  // namespace

TRAINYARD_PLUGIN("synthetic", "1.1.0", "synthetic classification and segmentation data", register_components)
