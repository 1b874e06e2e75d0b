// meters: loss and top-k accuracy (Playground's train/test top-1 and top-5).
#include <trainyard/plugin.h>

#include "meters.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_meter("loss", "mean loss per sample (reports: loss)", meters::loss_schema(),
              [](const trainyard::Options& o, const trainyard::Context&) { return meters::make_loss(o); });
  r.add_meter("topk_accuracy", "fraction of samples whose class is among the k top outputs (reports: accuracy_topK)",
              meters::topk_schema(), meters::make_topk);
}

}  // namespace

TRAINYARD_PLUGIN("meters", "1.0.0", "loss and top-k accuracy meters", register_components)
