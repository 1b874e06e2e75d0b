#pragma once
// What every command on an experiment does first: read EXP.yaml with its
// --set values, load the plugin folders it names, validate it and resolve its
// precision on this machine. What the CLI sees of run/ besides the modes.
#include <string>
#include <vector>

#include "config/experiment.h"
#include "plugins/registry.h"

namespace trainyard::host {

/// Resolves loop.precision on this machine (the experiment's and each
/// stage's): `auto` becomes a precision, a written one may get a warning
/// (choose_precision()). load_experiment() calls it.
void resolve_precision(Experiment& experiment);

/// Says what auto chose and why, and warns about a precision that is slow
/// here, each line once over `loops` (the experiment's loop section and each
/// stage's): at validate and at a run's start (rank 0).
void announce_precision(const std::vector<const LoopConfig*>& loops);

/// Reads the experiment, loads the plugin folders it and `plugin_dirs` name
/// (the built-in folder last), validates it and resolves its precision.
/// Throws ConfigError.
Experiment load_experiment(const std::string& file, const std::vector<std::string>& sets,
                           const std::vector<std::string>& plugin_dirs, Registry& registry);

}  // namespace trainyard::host
