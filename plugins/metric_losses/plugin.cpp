// metric_losses: triplet margin and contrastive losses with online mining,
// and ArcFace with its learned class centres.
#include <trainyard/plugin.h>

#include "metric_losses.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_loss("triplet_margin", "triplet margin loss on embeddings, triplets mined in the batch (all, hard, semihard)",
             metric_losses::triplet_margin_schema(), [](const trainyard::Options& o, const trainyard::Context&) {
               return metric_losses::make_triplet_margin(o);
             });
  r.add_loss("contrastive", "contrastive loss on embeddings over every positive and negative pair of the batch",
             metric_losses::contrastive_schema(),
             [](const trainyard::Options& o, const trainyard::Context&) { return metric_losses::make_contrastive(o); });
  r.add_loss("arcface",
             "additive angular margin loss (ArcFace): embeddings against a learned centre per class, cross-entropy "
             "on the scaled cosines",
             metric_losses::arcface_schema(), metric_losses::make_arcface);
}

}  // namespace

TRAINYARD_PLUGIN("metric_losses", "0.2.0",
                 "metric-learning losses: triplet and contrastive with online mining, ArcFace", register_components)
