#pragma once
#include <memory>

#include <trainyard/optimizer.h>
#include <trainyard/options.h>

namespace optimizers {

trainyard::Schema sgd_schema();
std::shared_ptr<trainyard::Optimizer> make_sgd(const trainyard::Options& options);
trainyard::Schema adam_schema();
std::shared_ptr<trainyard::Optimizer> make_adam(const trainyard::Options& options);

}  // namespace optimizers
