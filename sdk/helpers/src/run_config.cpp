#include "trainyard/run_config.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace trainyard {
namespace {

void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, ConfigValue>& out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items())
      if (!(prefix.empty() && key == "plugin_dirs")) flatten(value, prefix.empty() ? key : prefix + "." + key, out);
  } else if (j.is_boolean()) {
    out[prefix] = j.get<bool>();
  } else if (j.is_number()) {
    out[prefix] = j.get<double>();
  } else if (j.is_string()) {
    out[prefix] = j.get<std::string>();
  } else {
    out[prefix] = j.dump();
  }
}

}  // namespace

std::map<std::string, ConfigValue> run_config_values(const std::string& run_dir) {
  std::map<std::string, ConfigValue> out;
  std::ifstream in(std::filesystem::path(run_dir) / "config.json");
  if (!in) return out;
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_object()) flatten(config, "", out);
  return out;
}

std::string config_value_text(const ConfigValue& value) {
  if (const bool* flag = std::get_if<bool>(&value)) return *flag ? "true" : "false";
  if (const std::string* text = std::get_if<std::string>(&value)) return *text;
  const double number = std::get<double>(value);
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {  // the shortest text that reads back equal
    std::snprintf(buf, sizeof buf, "%.*g", digits, number);
    if (std::strtod(buf, nullptr) == number) break;
  }
  return buf;
}

}  // namespace trainyard
