#include "run/experiment_file.h"

#include "run/auto_choices.h"

#include <optional>
#include <set>

#include "distributed/device.h"
#include "log/log.h"
#include "plugins/library_loader.h"
#include "train/precision.h"

namespace trainyard::host {

Experiment load_experiment(const std::string& file, const std::vector<std::string>& sets,
                           const std::vector<std::string>& plugin_dirs, Registry& registry) {
  ExperimentSource source = read_experiment(file, sets);
  load_plugin_folders(plugin_search_path(experiment_plugin_dirs(source), plugin_dirs), registry);
  Experiment e = validate_experiment(std::move(source), registry);
  resolve_precision(e);
  return e;
}

}  // namespace trainyard::host
