#pragma once
#include <memory>

#include <trainyard/context.h>
#include <trainyard/loss.h>
#include <trainyard/options.h>

namespace segmentation_losses {

trainyard::Schema dice_schema();
std::shared_ptr<trainyard::Loss> make_dice(const trainyard::Options& options, const trainyard::Context& context);

}  // namespace segmentation_losses
