#pragma once
// What every command on an experiment does first: read EXP.yaml with its
// --set values, load the plugin folders it names, validate it and resolve its
// precision on this machine (run/auto_choices.h). What the CLI sees of run/ besides the modes.
#include <string>
#include <vector>

#include "config/experiment.h"
#include "plugins/registry.h"

namespace trainyard::host {

/// Reads the experiment, loads the plugin folders it and `plugin_dirs` name
/// (the built-in folder last), validates it and resolves its precision.
/// Throws ConfigError.
Experiment load_experiment(const std::string& file, const std::vector<std::string>& sets,
                           const std::vector<std::string>& plugin_dirs, Registry& registry);

}  // namespace trainyard::host
