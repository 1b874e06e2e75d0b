#pragma once
// Before anything is written, one real batch of each split goes through the
// components as training will use them: dataset -> network -> loss ->
// meters. What does not fit (a network with 7 outputs for 4 classes, a
// dataset whose get_batch returns fewer rows than asked for, a forward that
// returns half the batch or nothing) is a ConfigError naming the component
// and the shapes, instead of a crash in the loss or a run that trains
// silently on nonsense.
#include <string>
#include <vector>

#include "config/experiment.h"
#include "train/components.h"

namespace trainyard::host {

/// Checks the built components with a few samples of each split. Leaves the
/// network's modes, the meters' accumulators and the CPU random generator
/// as it found them, so a run is the same with or without the check.
/// Returns the names of the values a run of them reports (train_*, test_*
/// from the meters, and the loop's own: lr, grad_norm, ...), sorted.
/// Takes the whole Experiment: besides the loop's batch, the seed and the
/// network's memory format, it checks the value names that stopping, ema
/// and output.plots refer to, and names their keys' file positions.
std::vector<std::string> check_wiring(Components& components, const Experiment& experiment, const Context& context);

}  // namespace trainyard::host
