#include "config/snapshot.h"

#include "config/renamed_keys.h"

#include <algorithm>
#include <filesystem>

#include "config/config_file.h"
#include "config/sections.h"
#include "trainyard/error.h"
#include "util/sha256.h"

namespace trainyard::host {

namespace {

// A default as config_changes() shows a scalar ("" for lists: their elements
// are compared one by one, never as a whole).
std::string default_text(const Value& value) {
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&value)) return to_string(Value(*d));
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  return "";
}

// The schemas of `e`'s entries, each under `prefix` + its key: the host
// sections', then the components' ("dataset.train", "meters[1]").
void add_schemas(const Experiment& e, const std::string& prefix, std::map<std::string, const Schema*>& schemas) {
  for (const auto& [section, schema] : host_sections()) schemas.emplace(prefix + section, schema);
  auto add = [&](const std::string& entry, const ComponentConfig& c) {
    schemas.emplace(prefix + entry, c.component ? &c.component->schema : nullptr);
  };
  add("network", e.network);
  add("loss", e.loss);
  add("optimizer", e.optimizer);
  add("dataset.train", e.train_data);
  add("dataset.test", e.test_data);
  for (const auto* list : {&e.meters, &e.callbacks, &e.overrides})
    for (const auto& c : *list) add(c.key, c);
}

}  // namespace

ExperimentSnapshot::ExperimentSnapshot(const Experiment& e) : resolved_(e.resolved()) {
  add_schemas(e, "", schemas_);
  // "stages[1].loop.epochs": stage 1's own experiment.
  for (size_t k = 0; k < e.stages.size(); ++k) add_schemas(e.stages[k], "stages[" + std::to_string(k) + "].", schemas_);
}

std::string ExperimentSnapshot::yaml() const { return to_yaml(resolved_) + "\n"; }

std::string ExperimentSnapshot::json() const {
  // Bytes that are not UTF-8 (a path from an old file system) become U+FFFD rather than failing the run.
  return resolved_.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string ExperimentSnapshot::sha256() const { return resolved_sha256(resolved_); }
std::string resolved_sha256(const nlohmann::ordered_json& resolved) { return sha256_hex(to_yaml(resolved)); }

std::string ExperimentSnapshot::rank_comparable() const {
  nlohmann::ordered_json resolved = resolved_;
  resolved.erase("resolved_plugins");
  resolved.erase("plugin_dirs");
  resolved.erase("resolved_precision");  // compared on its own, with the values shown (run/session.cpp)
  return to_yaml(resolved);
}

bool ExperimentSnapshot::added_at_default(const ConfigChange& change) const {
  if (change.before != "(absent)" || change.key.back() == ']') return false;
  const size_t dot = change.key.rfind('.');
  if (dot == std::string::npos) return false;
  const auto found = schemas_.find(change.key.substr(0, dot));
  if (found == schemas_.end() || !found->second) return false;
  const std::string option = change.key.substr(dot + 1);
  for (const auto& spec : found->second->specs())
    if (spec.key == option)
      return spec.default_value && !default_text(*spec.default_value).empty() &&
             default_text(*spec.default_value) == change.after;
  return false;
}

std::vector<ConfigChange> ExperimentSnapshot::changes_from(const nlohmann::ordered_json& recorded) const {
  // Recorded by an older trainyard: its keys under their current names first.
  std::vector<ConfigChange> changes = config_changes(with_current_keys(recorded), resolved_);
  changes.erase(
      std::remove_if(changes.begin(), changes.end(), [&](const ConfigChange& c) { return added_at_default(c); }),
      changes.end());
  return changes;
}

std::vector<ConfigChange> ExperimentSnapshot::changes_since(const std::string& saved_config) const {
  return changes_from(read_config_file(saved_config));
}

std::vector<PlotSpec> saved_plots(const std::string& saved_config) {
  if (!std::filesystem::exists(saved_config)) return {};
  try {
    return plots_of_config(read_config_file(saved_config));
  } catch (const ConfigError&) {
    return {};  // the report goes on with the default plots
  }
}

}  // namespace trainyard::host
