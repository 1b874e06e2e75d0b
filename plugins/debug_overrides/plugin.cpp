// debug_overrides: stage overrides for debugging a model or the loop.
#include <trainyard/plugin.h>

#include "debug_overrides.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_override("no_test_no_checkpoint", "replaces test and checkpoint with nothing: trains only", trainyard::Schema(),
                 [](const trainyard::Options&, const trainyard::Context&) {
                   return debug_overrides::make_no_test_no_checkpoint();
                 });
  r.add_override(
      "overfit_batches", "trains every epoch on the same first N batches", debug_overrides::overfit_schema(),
      [](const trainyard::Options& o, const trainyard::Context&) { return debug_overrides::make_overfit(o); });
}

}  // namespace

TRAINYARD_PLUGIN("debug_overrides", "1.0.0", "stage overrides for debugging", register_components)
