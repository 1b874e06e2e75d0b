#pragma once
// The values a loss reports about its last compute() (SDK 1.4 LossValues:
// mined triplets, active fraction) as a meter the host adds to each phase.
#include <memory>

#include "trainyard/loss.h"
#include "trainyard/meter.h"

namespace trainyard::host {

/// A meter over `loss`'s last_values(): each value's mean over the phase's
/// steps, weighted by batch size (sums and counts, so it adds up over ranks
/// and resumes from a checkpoint like any meter). `values` is the loss's
/// LossValues (its Built record's loss_values); null, and so is the meter,
/// when the loss does not report values.
std::shared_ptr<Meter> make_loss_values_meter(const std::shared_ptr<Loss>& loss, LossValues* values);

}  // namespace trainyard::host
