#include "config/config_diff.h"

#include <map>

#include "config/sections.h"
#include "trainyard/options.h"

namespace trainyard::host {
namespace {

// Scalars as text, so a value read back from config.yaml (where 0.1 may be a
// number or a string) equals the one resolved now.
void flatten(const nlohmann::ordered_json& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (node.is_object()) {
    if (node.empty()) out[prefix] = "{}";
    for (const auto& [k, v] : node.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
  } else if (node.is_array()) {
    if (node.empty()) out[prefix] = "[]";
    for (size_t i = 0; i < node.size(); ++i) flatten(node[i], prefix + "[" + std::to_string(i) + "]", out);
  } else if (node.is_string()) {
    out[prefix] = node.get<std::string>();
  } else if (node.is_number_float()) {
    out[prefix] = to_string(Value(node.get<double>()));
  } else {
    out[prefix] = node.dump();  // integers, booleans, null
  }
}

// A change of `key` (flattened: "loop.epochs", "stages[1].loop.epochs",
// "callbacks[0].every") that a resumed run may make: a section key marked
// changeable on resume where it is declared (config/sections.cpp), in a
// stage too, or any callback entry (callbacks watch the run; they do not
// change what it computes).
bool allowed_on_resume(std::string key) {
  if (key.rfind("stages[", 0) == 0)
    if (const size_t end = key.find("]."); end != std::string::npos) key = key.substr(end + 2);
  if (key == "callbacks" || key.rfind("callbacks[", 0) == 0) return true;
  return changeable_on_resume(key);
}

}  // namespace

std::vector<ConfigChange> config_changes(const nlohmann::ordered_json& saved, const nlohmann::ordered_json& now) {
  std::map<std::string, std::string> a, b;
  flatten(saved, "", a);
  flatten(now, "", b);
  auto ignored = [](const std::string& k) {
    return k.rfind("resolved_plugins", 0) == 0 || k.rfind("plugin_dirs", 0) == 0 ||
           k.rfind("resolved_precision", 0) == 0;
  };
  std::vector<ConfigChange> out;
  auto add = [&](const std::string& k, const std::string& before, const std::string& after) {
    if (!ignored(k)) out.push_back({k, before, after, allowed_on_resume(k)});
  };
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end())
      add(k, v, "(absent)");
    else if (it->second != v)
      add(k, v, it->second);
  }
  for (const auto& [k, v] : b)
    if (!a.count(k)) add(k, "(absent)", v);
  return out;
}

std::string describe_changes(const std::vector<ConfigChange>& changes) {
  std::string s;
  for (const auto& c : changes)
    s += "  " + c.key + ": " + c.before + " -> " + c.after + (c.allowed ? "" : " (not allowed on resume)") + "\n";
  return s;
}

}  // namespace trainyard::host
