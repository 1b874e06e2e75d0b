#include "train/schedule.h"

#include <algorithm>
#include <cmath>

namespace trainyard::host {

double schedule_factor(const ScheduleConfig& s, int64_t step, int64_t total, double first_group_lr) {
  if (s.warmup_steps > 0 && step < s.warmup_steps)
    return s.warmup_start_factor + (1 - s.warmup_start_factor) * double(step) / double(s.warmup_steps);
  // After warmup, the schedule runs from its own step 0 over what is left.
  const int64_t t = step - s.warmup_steps;
  const double span = double(std::max<int64_t>(1, total - s.warmup_steps));
  const double progress = std::min(1.0, double(t) / span);
  if (s.policy == "step") {
    size_t i = size_t(std::upper_bound(s.boundaries.begin(), s.boundaries.end(), t) - s.boundaries.begin());
    return first_group_lr > 0 ? s.values[i] / first_group_lr : 0;
  }
  if (s.policy == "multistep") {
    auto passed = std::upper_bound(s.milestones.begin(), s.milestones.end(), t) - s.milestones.begin();
    return std::pow(s.gamma, double(passed));
  }
  if (s.policy == "exp") {
    double e = double(t) / double(s.decay_steps);
    return std::pow(s.gamma, s.staircase ? std::floor(e) : e);
  }
  if (s.policy == "cosine") return s.min_factor + (1 - s.min_factor) * 0.5 * (1 + std::cos(M_PI * progress));
  if (s.policy == "poly") return s.min_factor + (1 - s.min_factor) * std::pow(1 - progress, s.power);
  return 1.0;
}

}  // namespace trainyard::host
