#include "train/stopping.h"

#include "train/guard.h"
#include "trainyard/error.h"
#include "util/json.h"
#include "util/text.h"

namespace trainyard::host {

StoppingRule::StoppingRule(StoppingConfig config, std::function<std::string(const std::string& key)> where)
    : config_(std::move(config)), where_(std::move(where)) {}

bool StoppingRule::minimized(const std::string& meter) const { return config_.minimizes(meter); }

std::optional<std::string> StoppingRule::target_reached(const MeterValues& values) const {
  const auto& s = config_;
  if (s.target_meter.empty()) return std::string();
  auto it = values.find(s.target_meter);
  if (it == values.end()) return std::nullopt;
  const double v = it->second;
  if (!(minimized(s.target_meter) ? v <= s.target : v >= s.target)) return std::string();
  return "target reached: " + s.target_meter + " " + json_number(v) + (minimized(s.target_meter) ? " <= " : " >= ") +
         json_number(s.target);
}

namespace {
std::vector<std::string> names_of(const MeterValues& values) {
  std::vector<std::string> names;
  for (const auto& [name, value] : values) names.push_back(name);
  return names;
}
}  // namespace

StoppingRule::Verdict StoppingRule::judge_epoch(const MeterValues& values) {
  const auto& s = config_;
  Verdict verdict;
  if (!s.target_meter.empty()) {
    auto reached = target_reached(values);
    if (!reached)
      throw LocatedConfigError(where_("target_meter") + ": no meter value '" + s.target_meter + "'",
                               "expected one of the run's values (" + join(names_of(values)) + ")",
                               did_you_mean(s.target_meter, names_of(values)));
    if (!reached->empty()) verdict.stops.push_back(*reached);
  }
  if (s.monitor.empty()) return verdict;
  auto it = values.find(s.monitor);
  if (it == values.end())
    throw LocatedConfigError(where_("monitor") + ": no meter value '" + s.monitor + "'",
                             "expected one of the run's values (" + join(names_of(values)) + ")",
                             did_you_mean(s.monitor, names_of(values)));
  const double v = it->second;
  auto& p = progress_;
  const double gain = minimized(s.monitor) ? p.best - v : v - p.best;
  verdict.improved = !p.has_best || gain > s.min_delta;
  if (verdict.improved) {
    p.best = v;
    p.has_best = true;
    p.epochs_without_improvement = 0;
  } else if (++p.epochs_without_improvement >= s.patience && s.patience > 0) {
    verdict.stops.push_back("early stop: " + s.monitor + " did not improve for " +
                            std::to_string(p.epochs_without_improvement) + " epochs (best " + json_number(p.best) +
                            ")");
  }
  return verdict;
}

}  // namespace trainyard::host
