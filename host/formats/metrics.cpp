#include "formats/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "util/files.h"
#include "util/json.h"

namespace trainyard::host {
namespace {

using nlohmann::ordered_json;

ordered_json values_json(const NamedValues& values) {
  ordered_json out = ordered_json::object();
  for (const auto& [k, v] : values) out[k] = json_value(v);
  return out;
}

NamedValues values_of(const ordered_json& j) {
  NamedValues out;
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items())
    if (v.is_number())
      out[k] = v.get<double>();
    else if (v.is_null())
      out[k] = std::numeric_limits<double>::quiet_NaN();
  return out;
}

template <class T>
T field(const ordered_json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return fallback;
  }
}

}  // namespace

std::string encode_event(const MetricsEvent& e) {
  ordered_json j;
  j["phase"] = e.phase;
  j["epoch"] = e.epoch;
  j["iteration"] = e.iteration;
  if (!e.stage.empty()) j["stage"] = e.stage;
  j["time"] = json_value(e.time);
  j["values"] = values_json(e.values);
  return json_text(j);
}

std::optional<MetricsEvent> decode_event(const std::string& line) {
  const ordered_json j = parse_json(line);
  if (!j.is_object() || !j.contains("phase") || !j.contains("iteration")) return std::nullopt;
  MetricsEvent e;
  e.phase = field<std::string>(j, "phase", "");
  e.epoch = field<int64_t>(j, "epoch", 0);
  e.iteration = field<int64_t>(j, "iteration", 0);
  e.stage = field<std::string>(j, "stage", "");
  e.time = field<double>(j, "time", 0.0);
  if (auto it = j.find("values"); it != j.end()) e.values = values_of(*it);
  return e;
}

std::vector<MetricsEvent> read_events(const std::string& path) {
  std::vector<MetricsEvent> events;
  for (const auto& line : read_lines(path))
    if (auto e = decode_event(line)) events.push_back(std::move(*e));
  return events;
}

void DurationStats::add(double seconds) {
  mean += (seconds - mean) / static_cast<double>(++count);
  max = count == 1 ? seconds : std::max(max, seconds);
}

namespace {
ordered_json stats_json(const DurationStats& s) {
  return {{"count", s.count}, {"mean", json_value(s.mean)}, {"max", json_value(s.max)}};
}
DurationStats stats_of(const ordered_json& j) {
  DurationStats s;
  if (!j.is_object()) return s;
  s.count = field<int64_t>(j, "count", 0);
  s.mean = field<double>(j, "mean", 0.0);
  s.max = field<double>(j, "max", 0.0);
  return s;
}
}  // namespace

bool RunSummary::stopped_by_criterion() const {
  return stopped.rfind("target reached", 0) == 0 || stopped.rfind("early stop", 0) == 0;
}

std::string encode_summary(const RunSummary& s) {
  ordered_json j;
  j["experiment"] = s.experiment;
  j["epochs_completed"] = s.epochs_completed;
  j["iteration"] = s.iteration;
  if (!s.stage.empty()) j["stage"] = s.stage;
  j["metrics"] = values_json(s.metrics);
  j["samples_per_sec"] = json_value(s.samples_per_sec);
  j["secs_per_train"] = json_value(s.secs_per_train);
  j["wall_s"] = json_value(s.wall_s);
  if (!s.stopped.empty()) j["stopped"] = s.stopped;
  if (s.best) j["best"] = {{"meter", s.best->first}, {"value", json_value(s.best->second)}};
  j["checkpoint_blocked_s"] = stats_json(s.checkpoint_blocked_s);
  j["checkpoint_write_s"] = stats_json(s.checkpoint_write_s);
  return json_text(j, true) + "\n";
}

std::optional<RunSummary> read_summary(const std::string& path) {
  const ordered_json j = read_json_file(path);
  if (!j.is_object() || !j.contains("epochs_completed")) return std::nullopt;
  RunSummary s;
  s.experiment = field<std::string>(j, "experiment", "");
  s.epochs_completed = field<int64_t>(j, "epochs_completed", 0);
  s.iteration = field<int64_t>(j, "iteration", 0);
  s.stage = field<std::string>(j, "stage", "");
  if (auto it = j.find("metrics"); it != j.end()) s.metrics = values_of(*it);
  s.samples_per_sec = field<double>(j, "samples_per_sec", 0.0);
  s.secs_per_train = field<double>(j, "secs_per_train", 0.0);
  s.wall_s = field<double>(j, "wall_s", 0.0);
  s.stopped = field<std::string>(j, "stopped", "");
  if (auto it = j.find("best"); it != j.end() && it->is_object())
    s.best = std::make_pair(field<std::string>(*it, "meter", ""), field<double>(*it, "value", 0.0));
  if (auto it = j.find("checkpoint_blocked_s"); it != j.end()) s.checkpoint_blocked_s = stats_of(*it);
  if (auto it = j.find("checkpoint_write_s"); it != j.end()) s.checkpoint_write_s = stats_of(*it);
  return s;
}

std::string encode_values(const NamedValues& values) { return json_text(values_json(values)); }

}  // namespace trainyard::host
