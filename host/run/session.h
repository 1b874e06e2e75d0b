#pragma once
// This process's place in a run: its rank in the world, the process group
// joined (every rank checked to run the same experiment and plugins), and the
// Context components are built with.
#include <memory>
#include <string>

#include "config/experiment.h"
#include "distributed/communicator.h"
#include "distributed/world.h"
#include "plugins/registry.h"

namespace trainyard::host {

/// A single-process context (`world` for a rank of a data-parallel run): the
/// rank's device picked and made current, intra-op threads sized. The whole
/// experiment (or stage): the device comes from its distributed section and is
/// checked against every stage's precision, errors naming the keys' lines.
Context make_context(const Experiment& experiment, const World& world = World());

struct Session {
  World world;
  std::unique_ptr<Communicator> comm;  ///< null in a single-process run
  Context context;

  /// Detects the world and, when distributed, joins the process group and
  /// checks that every rank runs the same experiment with the same plugins:
  /// the whole experiment, for it compares the ranks' resolved configs.
  Session(const Experiment& experiment, const Registry& registry, const std::string& run_dir);
};

}  // namespace trainyard::host
