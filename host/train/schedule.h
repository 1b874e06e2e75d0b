#pragma once
// Learning-rate schedules, a host feature for every optimizer: a factor that
// multiplies each parameter group's starting learning rate, as a function of
// the step (optimizer update, or epoch) only, so a resumed run is exact.
#include <cstdint>
#include <string>
#include <vector>

#include "trainyard/options.h"

namespace trainyard::host {

struct ScheduleConfig {
  std::string policy = "constant";  ///< constant | step | multistep | exp | cosine | poly | custom (an override)
  std::string unit = "iteration";   ///< iteration (each optimizer update) | epoch
  std::vector<int64_t> boundaries;  ///< step: where the rate changes
  std::vector<double> values;       ///< step: the rates, one more than boundaries
  std::vector<int64_t> milestones;  ///< multistep: multiply by gamma at each
  double gamma = 0.1;               ///< multistep, exp
  int64_t decay_steps = 1;          ///< exp: gamma per this many steps
  bool staircase = false;           ///< exp: whole decay steps only
  double min_factor = 0.0;          ///< cosine, poly: the floor, as a fraction of the start rate
  double power = 1.0;               ///< poly
  int64_t warmup_steps = 0;         ///< linear warmup from warmup_start_factor
  double warmup_start_factor = 0.0;
};

const Schema& schedule_schema();
/// Throws ConfigError for inconsistent values (`where` names the section).
ScheduleConfig schedule_config(const Options& options, const std::string& where);

/// The factor at `step` of `total_steps` for a group whose starting rate is
/// `base_lr` (step values are absolute rates for the first group: their
/// factor is value / first_group_lr).
double schedule_factor(const ScheduleConfig& s, int64_t step, int64_t total_steps, double first_group_lr);

}  // namespace trainyard::host
