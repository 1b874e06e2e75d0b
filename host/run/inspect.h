#pragma once
// Looking at an experiment without training it: `run --dry-run` and what
// `validate` prints about the built components.
#include <string>

#include "config/experiment.h"
#include "train/components.h"

namespace trainyard::host {

/// One process, no run directory: the components of `experiment` built, one
/// train and one test batch run; the report and the parameter groups.
std::string dry_run(const Experiment& experiment);

/// Which parameters fell in which optimizer group, and what is frozen; each
/// line starts with `indent`.
std::string describe_groups(const Components& built, const Experiment& experiment, const std::string& indent);

}  // namespace trainyard::host
