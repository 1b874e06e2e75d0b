#pragma once
// What changed between a run's saved config.yaml and the experiment now being
// run on it, and whether the change may resume the run.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainyard::host {

struct ConfigChange {
  std::string key;       ///< dotted path: "optimizer.lr", "stages[1].loop.epochs"
  std::string before;    ///< "(absent)" when new
  std::string after;     ///< "(absent)" when removed
  bool allowed = false;  ///< extends the run or does not change what it computes
};

/// Differences between two resolved configs, keys in order. Ignores where
/// plugins were found (resolved_plugins, plugin_dirs): provenance records it;
/// and what loop.precision auto became (resolved_precision): another machine
/// may choose otherwise, which a resume reports but allows.
std::vector<ConfigChange> config_changes(const nlohmann::ordered_json& saved, const nlohmann::ordered_json& now);

/// "  optimizer.lr: 0.1 -> 0.2 (not allowed)" lines.
std::string describe_changes(const std::vector<ConfigChange>& changes);

}  // namespace trainyard::host
