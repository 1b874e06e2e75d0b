#include "config/snapshot.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "trainyard/error.h"
#include "util/json.h"
#include "util/sha256.h"

namespace trainyard::host {
namespace {

std::string emit(const YAML::Node& node) {
  YAML::Emitter out;
  out << node;
  return out.c_str();
}

// A YAML scalar as the JSON value it reads as: booleans, null, integers and
// numbers become those (a quoted scalar stays a string), everything else a string.
nlohmann::ordered_json scalar_json(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;
  if (s == "true" || s == "false") return s == "true";
  if (s == "null" || s == "~") return nullptr;
  if (!s.empty()) {
    char* end = nullptr;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (*end == '\0') return static_cast<int64_t>(i);
    const double d = std::strtod(s.c_str(), &end);
    if (*end == '\0' && std::isfinite(d) && s.find_first_of("xX") == std::string::npos) return d;
  }
  return s;
}

nlohmann::ordered_json to_json(const YAML::Node& node) {
  if (node.IsMap()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const auto& kv : node) out[kv.first.Scalar()] = to_json(kv.second);
    return out;
  }
  if (node.IsSequence()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& item : node) out.push_back(to_json(item));
    return out;
  }
  if (node.IsScalar()) return scalar_json(node);
  return nullptr;
}

}  // namespace

std::string resolved_yaml(const Experiment& e) { return emit(e.resolved()) + "\n"; }

std::string resolved_json(const Experiment& e) { return to_json(e.resolved()).dump(2) + "\n"; }

std::string resolved_sha256(const Experiment& e) { return sha256_hex(emit(e.resolved())); }

std::string rank_comparable_config(const Experiment& e) {
  YAML::Node resolved = e.resolved();
  resolved.remove("resolved_plugins");
  resolved.remove("plugin_dirs");
  return emit(resolved);
}

std::vector<ConfigChange> changes_since(const std::string& saved_config, const Experiment& e) {
  YAML::Node saved;
  try {
    saved = YAML::LoadFile(saved_config);
  } catch (const YAML::Exception& err) {
    throw ConfigError(saved_config + ": unreadable saved config: " + err.what(), "expected the config.yaml trainyard wrote",
                      "run with --fresh to start over (the old run directory is kept)");
  }
  return config_changes(saved, e.resolved());
}

std::vector<PlotSpec> saved_plots(const std::string& saved_config) {
  std::vector<PlotSpec> plots;
  if (!std::filesystem::exists(saved_config)) return plots;
  YAML::Node config;
  try {
    config = YAML::LoadFile(saved_config);
  } catch (const YAML::Exception&) {
    return plots;
  }
  if (!config.IsMap() || !config["output"] || !config["output"]["plots"] || !config["output"]["plots"].IsSequence())
    return plots;
  for (const auto& n : config["output"]["plots"]) {
    PlotSpec p;
    p.title = n["title"].as<std::string>("");
    p.x = n["x"].as<std::string>("iteration");
    if (n["ys"].IsSequence())
      for (const auto& y : n["ys"]) p.ys.push_back(y.as<std::string>());
    if (!p.ys.empty()) plots.push_back(p);
  }
  return plots;
}

}  // namespace trainyard::host
