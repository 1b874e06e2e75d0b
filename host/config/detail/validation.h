#pragma once
// Private to host/config/: the validation steps the files of config/ share.
#include "config/detail/document.h"
#include "config/experiment.h"

namespace trainyard::host::detail {

/// One experiment without `stages:` (experiment.cpp).
Experiment validate_plain(const Document& document, const Registry& registry);
/// The component entries into `e` (components.cpp).
void read_components(const Document& document, const Registry& registry, Experiment& e);
/// An experiment with `stages:`: the base, then each stage merged over
/// everything before it (stages.cpp).
Experiment validate_staged(const Document& document, const Registry& registry);

}  // namespace trainyard::host::detail
