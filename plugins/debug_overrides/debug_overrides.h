#pragma once
#include <memory>

#include <trainyard/options.h>
#include <trainyard/override.h>

namespace debug_overrides {

std::shared_ptr<trainyard::AdditionalOverride> make_no_test_no_checkpoint();
trainyard::Schema overfit_schema();
std::shared_ptr<trainyard::AdditionalOverride> make_overfit(const trainyard::Options& options);

}  // namespace debug_overrides
