#pragma once
// Finding plugin folders and loading the libraries in them with Boost.DLL.
#include <string>
#include <vector>

#include "plugins/registry.h"

namespace trainyard::host {

struct PluginFolder {
  std::string path;
  /// Where it was named: "built-in", "user folder", "TRAINYARD_PLUGIN_PATH", "plugin_dirs", "--plugin-dir".
  std::string origin;
  /// What a missing folder is: nothing (the user folder, a default), a
  /// warning naming it (TRAINYARD_PLUGIN_PATH, as GST_PLUGIN_PATH), or an
  /// error (what a command line or experiment names).
  enum class IfMissing { skip, warn, error } if_missing = IfMissing::error;
};

/// The user's plugin folder: $XDG_DATA_HOME/trainyard/plugins, by default
/// ~/.local/share/trainyard/plugins ("" without HOME).
std::string user_plugin_dir();
/// "searched: DIR (built-in), DIR (user folder, absent), ...; add a folder with
/// --plugin-dir, plugin_dirs: in the experiment, TRAINYARD_PLUGIN_PATH, or
/// by copying the library into the user folder": for "not found" messages.
std::string searched_folders_text(const std::vector<PluginFolder>& folders);

/// The built-in plugin folder: build/plugins next to build/bin, or
/// lib/trainyard/plugins in an installed tree.
std::string builtin_plugin_dir();

/// Search order: built-in, TRAINYARD_PLUGIN_PATH (colon-separated), the
/// experiment's plugin_dirs, then --plugin-dir.
std::vector<PluginFolder> plugin_search_path(const std::vector<std::string>& experiment_dirs,
                                             const std::vector<std::string>& cli_dirs);

/// Loads every *.so in every folder (sorted by name) into the registry.
/// Throws ConfigError for a missing folder or a library that cannot be used,
/// unless `refused` is given: then each refused library's error is collected
/// there and loading goes on (for `trainyard plugins`).
void load_plugin_folders(const std::vector<PluginFolder>& folders, Registry& registry,
                         std::vector<std::string>* refused = nullptr);

/// Loads one library: checks the entry point, API version and fingerprint,
/// then calls its registration. The library stays loaded until exit.
void load_plugin_library(const std::string& path, Registry& registry);

}  // namespace trainyard::host
