#pragma once
// The resolved experiment as the rest of the host uses it: the run
// directory's config.yaml and config.json, the hash checkpoints carry, what
// ranks compare, and what changed since a run's saved config. No yaml-cpp
// type leaves config/.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config_diff.h"
#include "config/experiment.h"

namespace trainyard::host {

/// The experiment resolved once (Experiment::resolved(): every default
/// filled in, paths absolute) and what the host derives from it. Made from
/// the whole Experiment: it is the serialised experiment, every section.
/// A value: it keeps no reference to the experiment.
class ExperimentSnapshot {
 public:
  explicit ExperimentSnapshot(const Experiment& experiment);

  const nlohmann::ordered_json& resolved() const { return resolved_; }
  /// config.yaml's text.
  std::string yaml() const;
  /// config.json's text: the same as JSON.
  std::string json() const;
  /// SHA-256 of config.yaml's text (recorded in checkpoint manifests).
  std::string sha256() const;
  /// The resolved config without where plugins were found (which may differ
  /// between machines): what every rank of a run must agree on.
  std::string rank_comparable() const;
  /// Differences between a recorded resolved config (a checkpoint manifest's,
  /// a run's config.yaml) and this one, less the keys a newer trainyard
  /// added since it was recorded: absent there and now at their schema's
  /// default (a host section's key or a component's option), which the older
  /// version ran with implicitly. Without this, every option added to trainyard
  /// would stop every run started before the upgrade from resuming.
  std::vector<ConfigChange> changes_from(const nlohmann::ordered_json& recorded) const;
  /// changes_from() a run's saved config (config.yaml). Throws ConfigError
  /// naming the file when it cannot be read.
  std::vector<ConfigChange> changes_since(const std::string& saved_config) const;

 private:
  bool added_at_default(const ConfigChange& change) const;

  nlohmann::ordered_json resolved_;
  /// The schema of each entry whose options are keys ("loop", "network",
  /// "meters[1]", "stages[1].network"): a host section's or the component's.
  std::map<std::string, const Schema*> schemas_;
};

/// SHA-256 of an experiment already resolved (Experiment::resolved()), as
/// ExperimentSnapshot::sha256.
std::string resolved_sha256(const nlohmann::ordered_json& resolved);
/// output.plots of a run's saved config.yaml (empty when absent or unreadable).
std::vector<PlotSpec> saved_plots(const std::string& saved_config);

}  // namespace trainyard::host
