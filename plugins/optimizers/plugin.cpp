// optimizers: SGD (momentum, Nesterov, weight decay) and Adam.
#include <trainyard/plugin.h>

#include "optimizers.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_optimizer("sgd", "stochastic gradient descent with momentum, Nesterov and weight decay",
                  optimizers::sgd_schema(),
                  [](const trainyard::Options& o, const trainyard::Context&) { return optimizers::make_sgd(o); });
  r.add_optimizer("adam", "Adam (Kingma and Ba), optionally AMSGrad", optimizers::adam_schema(),
                  [](const trainyard::Options& o, const trainyard::Context&) { return optimizers::make_adam(o); });
}

}  // namespace

TRAINYARD_PLUGIN("optimizers", "1.0.0", "SGD and Adam", register_components)
