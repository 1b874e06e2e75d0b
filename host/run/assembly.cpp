#include "run/assembly.h"

#include <torch/utils.h>

#include "train/builtin_hooks.h"
#include "train/trainer.h"
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

std::unique_ptr<Trainer> assemble_stage(const Experiment& stage, Context& context, Communicator* comm,
                                        const RunPaths& paths, std::shared_ptr<CheckpointStore> store) {
  auto trainer = std::make_unique<Trainer>(stage, build_checked(stage, context), context, paths, std::move(store));
  trainer->set_communicator(comm);
  add_builtin_hooks(*trainer);
  if (stage.ema.enabled) {
    auto average = std::make_shared<WeightAverage>(stage.ema, trainer->network());
    trainer->set_weight_average(average);
    // First after each update: every later listener sees the current average.
    trainer->hooks().add(weight_average_hook(average), priority::highest);
  }
  return trainer;
}

}  // namespace trainyard::host
