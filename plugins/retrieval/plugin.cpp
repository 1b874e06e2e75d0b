// retrieval: how well the network's embeddings find samples of the query's
// class among the other samples of a test pass (recall@k, precision@1,
// R-precision, mAP@R).
#include <trainyard/plugin.h>

#include "retrieval.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_meter("retrieval",
              "each test sample queries the others by embedding distance (reports: recall_at_K, precision_at_1, "
              "r_precision, map_at_r; test phase only)",
              retrieval::schema(), retrieval::make);
}

}  // namespace

TRAINYARD_PLUGIN("retrieval", "0.1.0", "retrieval meters over embeddings", register_components)
