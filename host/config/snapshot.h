#pragma once
// The resolved experiment as the rest of the host uses it: the run
// directory's config.yaml and config.json, the hash checkpoints carry, what
// ranks compare, and what changed since a run's saved config. No yaml-cpp
// type leaves config/.
#include <string>
#include <vector>

#include "config/config_diff.h"
#include "config/experiment.h"

namespace trainyard::host {

/// config.yaml's text: every default filled in, paths absolute.
std::string resolved_yaml(const Experiment& experiment);
/// config.json's text: the same as JSON.
std::string resolved_json(const Experiment& experiment);
/// SHA-256 of config.yaml's text (recorded in checkpoint manifests).
std::string resolved_sha256(const Experiment& experiment);
/// The same from an experiment already resolved (Experiment::resolved()).
std::string resolved_sha256(const nlohmann::ordered_json& resolved);
/// The resolved config without where plugins were found (which may differ
/// between machines): what every rank of a run must agree on.
std::string rank_comparable_config(const Experiment& experiment);
/// Differences between a recorded resolved config (a checkpoint manifest's,
/// a run's config.yaml) and `experiment`, less the keys a newer trainyard
/// added since it was recorded: absent there and now at their schema's
/// default (a host section's key or a component's option), which the older
/// version ran with implicitly. Without this, every option added to trainyard
/// would stop every run started before the upgrade from resuming.
std::vector<ConfigChange> changes_from(const nlohmann::ordered_json& recorded, const Experiment& experiment);
/// changes_from() a run's saved config (config.yaml). Throws ConfigError
/// naming the file when it cannot be read.
std::vector<ConfigChange> changes_since(const std::string& saved_config, const Experiment& experiment);
/// output.plots of a run's saved config.yaml (empty when absent or unreadable).
std::vector<PlotSpec> saved_plots(const std::string& saved_config);

}  // namespace trainyard::host
