// optimizers: SGD (momentum, Nesterov, weight decay; fused update), Adam, AdamW and RMSprop.
#include <trainyard/plugin.h>

#include "optimizers.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_optimizer("sgd", "stochastic gradient descent with momentum, Nesterov and weight decay",
                  optimizers::sgd_schema(),
                  [](const trainyard::Options& o, const trainyard::Context&) { return optimizers::make_sgd(o); });
  r.add_optimizer("adam", "Adam (Kingma and Ba), optionally AMSGrad", optimizers::adam_schema(),
                  [](const trainyard::Options& o, const trainyard::Context&) { return optimizers::make_adam(o); });
  r.add_optimizer("adamw", "Adam with decoupled weight decay (Loshchilov and Hutter)", optimizers::adamw_schema(),
                  [](const trainyard::Options& o, const trainyard::Context&) { return optimizers::make_adamw(o); });
  r.add_optimizer("rmsprop", "RMSprop (Hinton), optionally centered and with momentum", optimizers::rmsprop_schema(),
                  [](const trainyard::Options& o, const trainyard::Context&) { return optimizers::make_rmsprop(o); });
}

}  // namespace

TRAINYARD_PLUGIN("optimizers", "1.2.0", "SGD, Adam, AdamW and RMSprop", register_components)
