#pragma once
// additional_override components installed into a loop's stage table.
#include <vector>

#include "train/components.h"
#include "trainyard/loop.h"

namespace trainyard::host {

/// Lets each override install itself into `stages` (in install order) and
/// wraps every stage it replaces so that a failure inside the replacement
/// (not inside a default it calls) is reported against the override.
/// Returns whether one of them replaced train_batches (whose length is then
/// its own).
bool install_overrides(const std::vector<Built<AdditionalOverride>>& overrides, Stages& stages, Loop& loop);

}  // namespace trainyard::host
