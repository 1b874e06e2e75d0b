#pragma once
#include <memory>

#include <trainyard/dataset.h>
#include <trainyard/options.h>

namespace fashion_mnist {

trainyard::Schema schema();
std::shared_ptr<trainyard::Dataset> make(const trainyard::Options& options);

}  // namespace fashion_mnist
