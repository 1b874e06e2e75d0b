#pragma once
// The one place a stage is put together: components, the wiring check, the
// loop. Every mode (train, validate, eval, predict, export, find-lr) goes
// through it, so a new mode (embed, search, averaged weights) is not a new
// copy of the sequence. Internal to run/: the CLI sees the modes, not this.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/experiment.h"
#include "formats/run_paths.h"
#include "train/components.h"

namespace trainyard::host {

class CheckpointStore;
class Communicator;
class EpochLoop;
class HostHook;

/// A hook and its place among a loop's hooks (train/hooks.h's priorities).
struct PlacedHook {
  std::shared_ptr<HostHook> hook;
  int64_t priority = 0;
};

/// What a mode that trains (`trainyard run`) adds to each stage's loop.
struct TrainingSettings {
  bool debug = false;             ///< --debug: every non-finite value stops the run, named
  int64_t profile_skip = 0;       ///< --profile A:B's A: loop.cuda_graph captures no earlier than step A+1
  std::vector<PlacedHook> hooks;  ///< the mode's own hooks (run/run_hooks.h)
};

/// The stage's components, built after seeding with the stage's seed (the
/// same initial weights whichever way a stage starts: fresh, resumed,
/// evaluated), with one batch put through them (check_wiring) before
/// anything is written. Throws ConfigError for bad input. `value_names`, if
/// given, gets the names of the values a run reports (check_wiring's). The
/// whole stage: every component's config, its loop section and its seed.
Components build_checked(const Experiment& stage, Context& context, std::vector<std::string>* value_names = nullptr);

/// The loop over build_checked()'s components, joined to `comm`'s ranks
/// (null: one process), writing under `paths` (empty: nowhere), with the
/// host's own hooks added (train/builtin_hooks.h, and the weight average's
/// with `ema:`): the one place hooks are added. `store`: the run's
/// checkpoints (null: the loop makes its own over paths.checkpoints).
/// `training` (a mode that trains): its debug setting and hooks, and with
/// loop.cuda_graph the captured train step (train/captured_train_step.h),
/// refused here (ConfigError) when the step cannot be captured. The whole
/// stage: build_checked's, and the loop's sections (loop, schedule,
/// stopping, ema, output).
std::unique_ptr<EpochLoop> assemble_stage(const Experiment& stage, Context& context, Communicator* comm,
                                          const RunPaths& paths, std::shared_ptr<CheckpointStore> store = nullptr,
                                          const TrainingSettings* training = nullptr);

}  // namespace trainyard::host
