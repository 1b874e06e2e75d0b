#include "config/snapshot.h"

#include <filesystem>

#include "config/config_file.h"
#include "trainyard/error.h"
#include "util/sha256.h"

namespace trainyard::host {

std::string resolved_yaml(const Experiment& e) { return to_yaml(e.resolved()) + "\n"; }

std::string resolved_json(const Experiment& e) {
  // Bytes that are not UTF-8 (a path from an old file system) become U+FFFD rather than failing the run.
  return e.resolved().dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string resolved_sha256(const Experiment& e) { return resolved_sha256(e.resolved()); }
std::string resolved_sha256(const nlohmann::ordered_json& resolved) { return sha256_hex(to_yaml(resolved)); }

std::string rank_comparable_config(const Experiment& e) {
  nlohmann::ordered_json resolved = e.resolved();
  resolved.erase("resolved_plugins");
  resolved.erase("plugin_dirs");
  resolved.erase("resolved_precision");  // compared on its own, with the values shown (run/session.cpp)
  return to_yaml(resolved);
}

std::vector<ConfigChange> changes_since(const std::string& saved_config, const Experiment& e) {
  return config_changes(read_config_file(saved_config), e.resolved());
}

std::vector<PlotSpec> saved_plots(const std::string& saved_config) {
  if (!std::filesystem::exists(saved_config)) return {};
  try {
    return plots_of_config(read_config_file(saved_config));
  } catch (const ConfigError&) {
    return {};  // the report goes on with the default plots
  }
}

}  // namespace trainyard::host
