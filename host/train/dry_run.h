#pragma once
// `trainyard run EXP.yaml --dry-run`: everything built, one train batch and
// one test batch run, nothing written. Prints the module tree with parameter
// counts and output shapes, the plugins used, and the time each part of a
// training step took.
#include <string>

#include "config/experiment.h"
#include "train/components.h"

namespace trainyard::host {

/// Runs one train step (data, forward, loss, backward, optimizer step) and one
/// test forward on the built components and returns the report. The
/// components' weights change by that one step; nothing reaches the disk.
/// Takes the whole Experiment: it reports every section (path, name, each
/// component's plugin and library, the loop's batches and precision).
std::string dry_run_report(const Experiment& experiment, Components& components, const Context& context);

}  // namespace trainyard::host
