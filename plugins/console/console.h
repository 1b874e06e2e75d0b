#pragma once
#include <memory>

#include <trainyard/callback.h>
#include <trainyard/options.h>

namespace console {

trainyard::Schema schema();
std::shared_ptr<trainyard::Callback> make(const trainyard::Options& options);

}  // namespace console
