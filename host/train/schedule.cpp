#include "train/schedule.h"

#include <algorithm>
#include <cmath>

#include "trainyard/error.h"

namespace trainyard::host {

const Schema& schedule_schema() {
  static const Schema schema = [] {
    Schema s;
    s.add("policy", "constant",
          "constant, step (piecewise), multistep, exp, cosine, poly, or custom (an additional_override replaces "
          "the schedule stage, e.g. one_cycle or cyclic)")
        .one_of({"constant", "step", "multistep", "exp", "cosine", "poly", "custom"});
    s.add("unit", "iteration", "step the schedule every optimizer update (iteration) or every epoch")
        .one_of({"iteration", "epoch"});
    s.add("boundaries", std::vector<int64_t>{}, "step: steps at which the rate changes").min(0);
    s.add("values", std::vector<double>{}, "step: the learning rates, one more than boundaries").min(0.0);
    s.add("milestones", std::vector<int64_t>{}, "multistep: steps at which the rate is multiplied by gamma").min(0);
    s.add("gamma", 0.1, "multistep and exp: the multiplier").range(0.0, 1.0);
    s.add("decay_steps", 1, "exp: gamma is applied once per this many steps").min(1);
    s.add("staircase", false, "exp: decay in whole steps of decay_steps");
    s.add("min_factor", 0.0, "cosine and poly: the final rate as a fraction of the starting rate").range(0.0, 1.0);
    s.add("power", 1.0, "poly: the exponent").min(0.0);
    s.add("warmup_steps", 0, "linear warmup over this many steps, before the schedule").min(0);
    s.add("warmup_start_factor", 0.0, "warmup starts at this fraction of the rate").range(0.0, 1.0);
    return s;
  }();
  return schema;
}

ScheduleConfig schedule_config(const Options& o, const std::string& where) {
  ScheduleConfig s;
  s.policy = o.get<std::string>("policy");
  s.unit = o.get<std::string>("unit");
  s.boundaries = o.get<std::vector<int64_t>>("boundaries");
  s.values = o.get<std::vector<double>>("values");
  s.milestones = o.get<std::vector<int64_t>>("milestones");
  s.gamma = o.get<double>("gamma");
  s.decay_steps = o.get<int64_t>("decay_steps");
  s.staircase = o.get<bool>("staircase");
  s.min_factor = o.get<double>("min_factor");
  s.power = o.get<double>("power");
  s.warmup_steps = o.get<int64_t>("warmup_steps");
  s.warmup_start_factor = o.get<double>("warmup_start_factor");
  if (s.policy == "step" && s.values.size() != s.boundaries.size() + 1)
    throw ConfigError(where + ": policy step has " + std::to_string(s.boundaries.size()) + " boundaries and " +
                          std::to_string(s.values.size()) + " values",
                      "expected one more value than boundaries", "e.g. boundaries: [1000, 2000], values: [0.1, 0.01, 0.001]");
  if (!std::is_sorted(s.boundaries.begin(), s.boundaries.end()) || !std::is_sorted(s.milestones.begin(), s.milestones.end()))
    throw ConfigError(where + ": boundaries and milestones must be increasing", "expected sorted steps", "");
  return s;
}

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
