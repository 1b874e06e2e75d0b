#pragma once
// The hooks `trainyard run` adds to every stage's loop beside the host's
// built-in ones (train/builtin_hooks.h): the stall watchdog's position,
// --profile's trace and --until-epoch's stop. Made once per run, so that
// --profile's window is checked before the session starts and one trace and
// one stop count span the stages; assemble_stage() adds them.
#include <string>
#include <vector>

#include "run/assembly.h"
#include "run/runner.h"

namespace trainyard::host {

/// `trainyard run`'s settings for every stage's loop: --debug, --profile's
/// first step, and the hooks above. `profile_dir`: RUN_DIR/profile. Throws
/// ConfigError naming --profile for a window that is not A:B.
TrainingSettings training_run_settings(const RunRequest& request, const std::string& profile_dir);

}  // namespace trainyard::host
