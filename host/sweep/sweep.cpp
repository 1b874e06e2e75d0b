#include "sweep/sweep.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "formats/metrics.h"
#include "formats/run_paths.h"
#include "trainyard/error.h"
#include "util/csv.h"
#include "util/json.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {

std::vector<std::string> split_values(const std::string& text) {
  std::vector<std::string> out;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[' || c == '{') ++depth;
    if (c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(current);
      current.clear();
      continue;
    }
    current += c;
  }
  out.push_back(current);
  for (auto& v : out) {
    v.erase(0, v.find_first_not_of(' '));
    v.erase(v.find_last_not_of(' ') + 1);
  }
  return out;
}

GridAxis parse_grid(const std::string& argument) {
  const auto eq = argument.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == argument.size())
    throw ConfigError("--grid " + argument + ": expected KEY=VALUE,VALUE,...",
                      "expected e.g. --grid optimizer.lr=0.1,0.01", "");
  GridAxis axis;
  axis.key = argument.substr(0, eq);
  axis.values = split_values(argument.substr(eq + 1));
  for (const auto& v : axis.values) {
    if (v.empty())
      throw ConfigError("--grid " + argument + ": an empty value", "expected values separated by commas", "");
  }
  std::set<std::string> unique(axis.values.begin(), axis.values.end());
  if (unique.size() != axis.values.size())
    throw ConfigError("--grid " + argument + ": a value is repeated", "expected distinct values", "");
  return axis;
}

std::vector<std::string> SweepPoint::sets() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : values) out.push_back(k + "=" + v);
  return out;
}

std::string point_name(const std::string& experiment_name,
                       const std::vector<std::pair<std::string, std::string>>& values) {
  std::string name = experiment_name;
  for (const auto& [k, v] : values) name += "--" + k + "=" + v;
  for (char& c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '=' || c == '+' || c == '-'))
      c = '_';
  return name;
}

std::vector<SweepPoint> expand_grid(const std::string& experiment_name, const std::vector<GridAxis>& axes) {
  std::vector<std::vector<std::pair<std::string, std::string>>> combos{{}};
  for (const auto& axis : axes) {
    std::vector<std::vector<std::pair<std::string, std::string>>> next;
    for (const auto& combo : combos)
      for (const auto& v : axis.values) {
        auto c = combo;
        c.emplace_back(axis.key, v);
        next.push_back(std::move(c));
      }
    combos = std::move(next);
  }
  std::vector<SweepPoint> points;
  std::set<std::string> names;
  for (auto& c : combos) {
    SweepPoint p{point_name(experiment_name, c), c};
    if (!names.insert(p.name).second)
      throw ConfigError("--grid: two points get the same run name '" + p.name + "'",
                        "expected values that differ after replacing characters outside [A-Za-z0-9._=+-]", "");
    points.push_back(std::move(p));
  }
  return points;
}

bool read_summary(const std::string& run_dir, int64_t total_epochs, std::map<std::string, double>& metrics,
                  double& wall_s) {
  const auto summary = host::read_summary(RunPaths(run_dir).summary);
  if (!summary) return false;
  metrics = summary->metrics;
  wall_s = summary->wall_s;
  // Done when every epoch ran, or a stopping criterion ended it (not a request from outside).
  return summary->epochs_completed >= total_epochs || summary->stopped_by_criterion();
}

std::string table_number(double v) { return std::isfinite(v) ? json_number(v) : readable_number(v); }

namespace {

std::vector<std::string> metric_columns(const std::vector<SweepResult>& results) {
  std::set<std::string> keys;
  for (const auto& r : results)
    for (const auto& [k, _] : r.metrics) keys.insert(k);
  return {keys.begin(), keys.end()};
}

}  // namespace

std::vector<SweepResult> ranked(std::vector<SweepResult> results, const Ranking& ranking) {
  // A NaN would break the sort's ordering (and drop or misplace rows): only finite values rank.
  auto has = [&](const SweepResult& r) {
    if (ranking.metric.empty()) return false;
    const auto it = r.metrics.find(ranking.metric);
    return it != r.metrics.end() && std::isfinite(it->second);
  };
  std::stable_sort(results.begin(), results.end(), [&](const SweepResult& a, const SweepResult& b) {
    if (has(a) != has(b)) return has(a);
    if (!has(a)) return false;
    if (a.epochs != b.epochs) return a.epochs > b.epochs;
    const double va = a.metrics.at(ranking.metric), vb = b.metrics.at(ranking.metric);
    return ranking.maximize ? va > vb : va < vb;
  });
  for (size_t i = 0; i < results.size(); ++i) {
    SweepResult& r = results[i];
    r.rank = has(r) ? static_cast<int64_t>(i) + 1 : 0;
    const auto it = r.metrics.find(ranking.metric);
    r.note =
        !r.rank && it != r.metrics.end() ? ranking.metric + " is " + readable_number(it->second) + ": not ranked" : "";
  }
  return results;
}

std::string sweep_csv(const std::vector<std::string>& keys, const std::vector<SweepResult>& results) {
  const auto metrics = metric_columns(results);
  std::string out = "rank,run,status,epochs";
  for (const auto& k : keys) out += "," + csv_cell(k);
  for (const auto& m : metrics) out += "," + m;
  out += ",wall_s,error\n";
  for (const auto& r : results) {
    out += (r.rank ? std::to_string(r.rank) : std::string()) + "," + csv_cell(r.point.name) + "," + csv_cell(r.status) +
           "," + std::to_string(r.epochs);
    for (const auto& [_, v] : r.point.values) out += "," + csv_cell(v);
    for (const auto& m : metrics) out += "," + (r.metrics.count(m) ? table_number(r.metrics.at(m)) : std::string());
    const std::string error = r.error + (r.error.empty() || r.note.empty() ? "" : "; ") + r.note;
    out += "," + json_number(r.wall_s) + "," + csv_cell(error) + "\n";
  }
  return out;
}

std::string sweep_markdown(const std::vector<std::string>& keys, const std::vector<SweepResult>& results) {
  const auto metrics = metric_columns(results);
  auto cell = [](std::string s) {
    for (auto& c : s)
      if (c == '|' || c == '\n') c = ' ';
    return s;
  };
  std::string out = "| rank | run | status | epochs |";
  for (const auto& k : keys) out += " " + cell(k) + " |";
  for (const auto& m : metrics) out += " " + m + " |";
  out += "\n|---|---|---|---|";
  for (size_t i = 0; i < keys.size() + metrics.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& r : results) {
    out += "| " + (r.rank ? std::to_string(r.rank) : std::string()) + " | " + cell(r.point.name) + " | " +
           cell(r.status + (r.error.empty() ? "" : ": " + r.error) + (r.note.empty() ? "" : " (" + r.note + ")")) +
           " | " + std::to_string(r.epochs) + " |";
    for (const auto& [_, v] : r.point.values) out += " " + cell(v) + " |";
    for (const auto& m : metrics) {
      char buf[32] = "";
      if (r.metrics.count(m)) std::snprintf(buf, sizeof buf, "%.4g", r.metrics.at(m));
      out += " " + std::string(buf) + " |";
    }
    out += "\n";
  }
  return out;
}

}  // namespace trainyard::host
