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
/// rank's device picked and made current, intra-op threads sized.
Context make_context(const Experiment& experiment, const World& world = World());

struct Session {
  World world;
  std::unique_ptr<Communicator> comm;  ///< null in a single-process run
  Context context;

  /// Detects the world and, when distributed, joins the process group and
  /// checks that every rank runs the same experiment with the same plugins.
  Session(const Experiment& experiment, const Registry& registry, const std::string& run_dir);
};

/// Resolves loop.precision on this machine (the experiment's and each
/// stage's): `auto` becomes a precision, a written one may get a warning
/// (choose_precision()). load_experiment() calls it.
void resolve_precision(Experiment& experiment);

/// Says what auto chose and why, and warns about a precision that is slow
/// here: at validate and at a run's start (rank 0).
void announce_precision(const Experiment& experiment);

/// Reads the experiment, loads the plugin folders it and `plugin_dirs` name
/// (the built-in folder last), validates it and resolves its precision.
/// Throws ConfigError.
Experiment load_experiment(const std::string& file, const std::vector<std::string>& sets,
                           const std::vector<std::string>& plugin_dirs, Registry& registry);

}  // namespace trainyard::host
