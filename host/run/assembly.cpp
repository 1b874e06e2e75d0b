#include "run/assembly.h"

#include <torch/utils.h>

#include "train/builtin_hooks.h"
#include "train/captured_train_step.h"
#include "train/epoch_loop.h"
#include "train/weight_average.h"
#include "train/wiring_check.h"

namespace trainyard::host {

Components build_checked(const Experiment& stage, Context& context, std::vector<std::string>* value_names) {
  torch::manual_seed(stage.seed);
  Components components = build_components(stage, context);
  std::vector<std::string> names = check_wiring(components, stage, context);
  if (value_names) *value_names = std::move(names);
  return components;
}

std::unique_ptr<EpochLoop> assemble_stage(const Experiment& stage, Context& context, Communicator* comm,
                                          const RunPaths& paths, std::shared_ptr<CheckpointStore> store,
                                          const TrainingSettings* training) {
  auto loop = std::make_unique<EpochLoop>(stage, build_checked(stage, context), context, paths, std::move(store));
  loop->set_communicator(comm);
  BuiltinHookSettings settings;
  settings.log_every_iters = stage.loop.log_every_iters;
  settings.test_every_iters = stage.loop.test_every_iters;
  settings.checkpoint_every_iters = stage.checkpoint.every_iters;
  settings.checkpoint_every_secs = stage.checkpoint.every_secs;
  settings.stall_timeout_secs = stage.loop.stall_timeout_secs;
  settings.keep_best = stage.checkpoint.keep_best;
  settings.experiment = stage.name;
  settings.monitor = stage.stopping.monitor;
  add_builtin_hooks(loop->hooks(), settings);
  // First after each update: every later listener sees the current average.
  if (stage.ema.enabled)
    loop->hooks().add(weight_average_hook(std::make_shared<WeightAverage>(stage.ema, loop->network())),
                      priority::highest);
  if (!training) return loop;
  for (const PlacedHook& placed : training->hooks) loop->hooks().add(placed.hook, placed.priority);
  loop->set_debug(training->debug);
  if (stage.loop.cuda_graph) install_captured_train_step(*loop, training->profile_skip);
  return loop;
}

}  // namespace trainyard::host
