#include "config/snapshot.h"

#include <algorithm>
#include <filesystem>

#include "config/config_file.h"
#include "config/sections.h"
#include "trainyard/error.h"
#include "util/sha256.h"

namespace trainyard::host {

std::string resolved_yaml(const Experiment& e) { return to_yaml(e.resolved()) + "\n"; }

std::string resolved_json(const Experiment& e) {
  // Bytes that are not UTF-8 (a path from an old file system) become U+FFFD rather than failing the run.
  return e.resolved().dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string resolved_sha256(const Experiment& e) { return resolved_sha256(e.resolved()); }
std::string resolved_sha256(const nlohmann::ordered_json& resolved) { return sha256_hex(to_yaml(resolved)); }

std::string rank_comparable_config(const Experiment& e) {
  nlohmann::ordered_json resolved = e.resolved();
  resolved.erase("resolved_plugins");
  resolved.erase("plugin_dirs");
  resolved.erase("resolved_precision");  // compared on its own, with the values shown (run/session.cpp)
  return to_yaml(resolved);
}

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

// The schema a key's last part is an option of: a host section's, or the
// component's at that entry ("dataset.train", "meters[1]"), in `e`.
const Schema* schema_of(const std::string& entry, const Experiment& e) {
  for (const auto& [section, schema] : host_sections())
    if (section == entry) return schema;
  auto of = [](const ComponentConfig& c) { return c.component ? &c.component->schema : nullptr; };
  if (entry == "network") return of(e.network);
  if (entry == "loss") return of(e.loss);
  if (entry == "optimizer") return of(e.optimizer);
  if (entry == "dataset.train") return of(e.train_data);
  if (entry == "dataset.test") return of(e.test_data);
  for (const auto* list : {&e.meters, &e.callbacks, &e.overrides})
    for (const auto& c : *list)
      if (c.key == entry) return of(c);
  return nullptr;
}

bool added_at_default(const ConfigChange& change, const Experiment& e) {
  if (change.before != "(absent)" || change.key.back() == ']') return false;
  std::string key = change.key;
  const Experiment* scope = &e;
  if (key.rfind("stages[", 0) == 0) {  // "stages[1].loop.epochs": stage 1's own experiment
    const size_t close = key.find("].");
    if (close == std::string::npos || close == 7 || key.find_first_not_of("0123456789", 7) != close) return false;
    const size_t k = std::stoul(key.substr(7, close - 7));
    if (k >= e.stages.size()) return false;
    scope = &e.stages[k];
    key = key.substr(close + 2);
  }
  const size_t dot = key.rfind('.');
  if (dot == std::string::npos) return false;
  const Schema* schema = schema_of(key.substr(0, dot), *scope);
  if (!schema) return false;
  for (const auto& spec : schema->specs())
    if (spec.key == key.substr(dot + 1))
      return spec.default_value && !default_text(*spec.default_value).empty() &&
             default_text(*spec.default_value) == change.after;
  return false;
}

}  // namespace

std::vector<ConfigChange> changes_from(const nlohmann::ordered_json& recorded, const Experiment& e) {
  std::vector<ConfigChange> changes = config_changes(recorded, e.resolved());
  changes.erase(
      std::remove_if(changes.begin(), changes.end(), [&](const ConfigChange& c) { return added_at_default(c, e); }),
      changes.end());
  return changes;
}

std::vector<ConfigChange> changes_since(const std::string& saved_config, const Experiment& e) {
  return changes_from(read_config_file(saved_config), e);
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
