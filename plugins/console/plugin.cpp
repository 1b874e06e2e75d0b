// console: progress and per-epoch lines on standard output.
#include <trainyard/plugin.h>

#include "console.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_callback("console", "progress line (terminal only) and one line per test and epoch", console::schema(),
                 [](const trainyard::Options& o, const trainyard::Context& c) { return console::make(o, c); });
}

}  // namespace

TRAINYARD_PLUGIN("console", "1.1.0", "console progress output", register_components)
