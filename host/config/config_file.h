#pragma once
// A run's saved config (config.yaml, config.json): written from
// Experiment::resolved(), read back as JSON.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/sections.h"

namespace trainyard::host {

/// The YAML text of a resolved config (config.yaml), keys in their order,
/// short lists in flow style.
std::string to_yaml(const nlohmann::ordered_json& config);

/// A saved config.yaml or config.json as JSON. Throws ConfigError naming the
/// file when it cannot be read or parsed.
nlohmann::ordered_json read_config_file(const std::string& path);

/// The plots a run's resolved config asks for (output.plots), or empty.
std::vector<PlotSpec> plots_of_config(const nlohmann::ordered_json& resolved);

}  // namespace trainyard::host
