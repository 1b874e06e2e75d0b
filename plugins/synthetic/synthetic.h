#pragma once
#include <memory>

#include <trainyard/dataset.h>
#include <trainyard/options.h>

namespace synthetic {

trainyard::Schema schema();
std::shared_ptr<trainyard::Dataset> make(const trainyard::Options& options);
trainyard::Schema shapes_schema();
std::shared_ptr<trainyard::Dataset> make_shapes(const trainyard::Options& options);

}  // namespace synthetic
