// metric_losses: triplet margin and contrastive losses with online mining.
#include <trainyard/plugin.h>

#include "metric_losses.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_loss("triplet_margin",
             "triplet margin loss on embeddings, triplets mined in the batch (all, hard, semihard)",
             metric_losses::triplet_margin_schema(),
             [](const trainyard::Options& o, const trainyard::Context&) { return metric_losses::make_triplet_margin(o); });
  r.add_loss("contrastive", "contrastive loss on embeddings over every positive and negative pair of the batch",
             metric_losses::contrastive_schema(),
             [](const trainyard::Options& o, const trainyard::Context&) { return metric_losses::make_contrastive(o); });
}

}  // namespace

TRAINYARD_PLUGIN("metric_losses", "0.1.0", "metric-learning losses with online mining", register_components)
