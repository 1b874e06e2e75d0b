#pragma once
#include <memory>

#include <trainyard/optimizer.h>
#include <trainyard/options.h>

namespace optimizers {

trainyard::Schema sgd_schema();
std::shared_ptr<trainyard::Optimizer> make_sgd(const trainyard::Options& options);
trainyard::Schema adam_schema();
std::shared_ptr<trainyard::Optimizer> make_adam(const trainyard::Options& options);
trainyard::Schema adamw_schema();  ///< adam's options; weight_decay is decoupled
std::shared_ptr<trainyard::Optimizer> make_adamw(const trainyard::Options& options);
trainyard::Schema rmsprop_schema();
std::shared_ptr<trainyard::Optimizer> make_rmsprop(const trainyard::Options& options);

}  // namespace optimizers
