#pragma once
// Learning-rate schedules, a host feature for every optimizer: a factor that
// multiplies each parameter group's starting learning rate, as a function of
// the step (optimizer update, or epoch) only, so a resumed run is exact.
#include <cstdint>

#include "config/sections.h"

namespace trainyard::host {

/// The factor at `step` of `total_steps` for a group whose starting rate is
/// `base_lr` (step values are absolute rates for the first group: their
/// factor is value / first_group_lr).
double schedule_factor(const ScheduleConfig& s, int64_t step, int64_t total_steps, double first_group_lr);

}  // namespace trainyard::host
