#include "train/captured_train_step.h"

#include <memory>

#include <ATen/record_function.h>

#include "config/step_rules.h"
#include "train/cuda_graph.h"
#include "train/epoch_loop.h"
#include "train/guard.h"
#include "train/output_fit.h"
#include "train/profiler.h"

namespace trainyard::host {
namespace {
constexpr bool built_with_cuda() {
#ifdef TRAINYARD_WITH_CUDA
  return true;
#else
  return false;
#endif
}
}  // namespace

void install_captured_train_step(EpochLoop& loop, int64_t profile_skip) {
  const Components& c = loop.components();
  const Context& context = loop.context();
  CudaGraphFacts run;
  run.built_with_cuda = built_with_cuda();
  run.cuda = context.device.is_cuda();
  run.world_size = context.world_size;
  run.iter_size = loop.iter_size();
  run.checks_read_every_update = loop.updater().why_checks_read_every_update();
  run.fixed_sample_shape = !context.dataset.sample_shape.empty();
  run.sample_fields = c.train_data.facets.field_dataset != nullptr;
  for (const auto& o : c.overrides)
    for (const auto& stage : o.object->replaces()) run.train_step_overridden |= stage == "train_step";
  if (const auto refusal = cuda_graph_refusal(run))
    throw ConfigError("loop.cuda_graph: this run's step cannot be captured: " + refusal->line());
  auto graph =
      std::make_shared<CapturedStep>(context.device, c.network.object->parameters(), capture_warmup(profile_skip));
  // The forward, loss and backward as the eager step runs them (the loss
  // not scaled: iter_size 1, no fp16).
  auto forward_loss_backward = [&loop](const Batch& batch) {
    const Components& parts = loop.components();
    StepTensors t;
    {
      RECORD_USER_SCOPE(trace_scope::forward);
      t.output = loop.forward(batch);
      t.loss = checked_loss(parts, t.output, batch, Fields{}, "training");  // no fields: refused above
    }
    RECORD_USER_SCOPE(trace_scope::backward);
    guarded(*parts.network.config, "backward", [&] { t.loss.backward(); });
    return t;
  };
  Stages& stages = loop.stages();
  stages.train_step = [&loop, graph, forward_loss_backward, eager = stages.train_step](const Batch& batch) {
    loop.begin_train_step();
    Updater& updater = loop.updater();
    if (const auto t = graph->run(batch, forward_loss_backward)) {
      if (graph->captured() && !updater.gradients_kept()) {
        updater.set_gradients_kept(true);
        loop.context().log("loop.cuda_graph: the step is captured at iteration " +
                           std::to_string(loop.iteration() + 1) + "; the later ones replay it");
      }
      updater.backward_done(t->loss);
      if (updater.due()) loop.finish_update();
      // Copies: the next replay overwrites the graph's own tensors, and hooks may keep these.
      return StepResult{batch, t->output.detach().clone(), t->loss.detach().clone()};
    }
    updater.zero_gradients_in_place();  // a batch the graph does not fit: its backward adds into the graph's gradients
    return eager(batch);
  };
}

}  // namespace trainyard::host
