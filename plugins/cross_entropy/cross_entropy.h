#pragma once
#include <memory>

#include <trainyard/context.h>
#include <trainyard/loss.h>
#include <trainyard/options.h>

namespace cross_entropy {

trainyard::Schema schema();
std::shared_ptr<trainyard::Loss> make(const trainyard::Options& options, const trainyard::Context& context);

}  // namespace cross_entropy
