#pragma once
#include <memory>

#include <trainyard/context.h>
#include <trainyard/network.h>
#include <trainyard/options.h>

namespace unet {

trainyard::Schema schema();
std::shared_ptr<trainyard::Network> make(const trainyard::Options& options, const trainyard::Context& context);

}  // namespace unet
