// A run's saved config: config.yaml written from the resolved experiment,
// and config.yaml or config.json read back; the YAML-JSON codec both use.
#include "config/config_file.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "config/detail/document.h"
#include "trainyard/error.h"
#include "util/json.h"

using nlohmann::ordered_json;

namespace trainyard::host {
namespace detail {

ordered_json plain_scalar(const std::string& s) {
  if (s == "true") return true;
  if (s == "false") return false;
  if (s == "null" || s == "~") return nullptr;
  if (!s.empty()) {
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (*end == '\0' && errno != ERANGE) return static_cast<int64_t>(i);
    const double d = std::strtod(s.c_str(), &end);
    if (*end == '\0' && std::isfinite(d) && s.find_first_of("xX") == std::string::npos) return d;
  }
  return s;
}

ordered_json to_json(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return nullptr;
  if (node.IsScalar()) return node.Tag() == "!" ? ordered_json(node.Scalar()) : plain_scalar(node.Scalar());
  if (node.IsSequence()) {
    ordered_json out = ordered_json::array();
    for (const auto& item : node) out.push_back(to_json(item));
    return out;
  }
  ordered_json out = ordered_json::object();
  for (const auto& kv : node) out[kv.first.Scalar()] = to_json(kv.second);
  return out;
}

ordered_json to_json(const Value& value) {
  return std::visit([](const auto& v) { return ordered_json(v); }, value);
}

}  // namespace detail

namespace {

bool all_scalars(const ordered_json& list) {
  for (const auto& item : list)
    if (item.is_structured()) return false;
  return true;
}

void emit(YAML::Emitter& out, const ordered_json& j) {
  switch (j.type()) {
    case ordered_json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [k, v] : j.items()) {
        out << YAML::Key << k << YAML::Value;
        emit(out, v);
      }
      out << YAML::EndMap;
      break;
    case ordered_json::value_t::array:
      if (all_scalars(j)) out << YAML::Flow;  // [256, 128] on one line
      out << YAML::BeginSeq;
      for (const auto& item : j) emit(out, item);
      out << YAML::EndSeq;
      break;
    case ordered_json::value_t::string: {
      const std::string& s = j.get_ref<const std::string&>();
      // Quoted when it would read back as a number, boolean or null.
      if (!detail::plain_scalar(s).is_string()) out << YAML::DoubleQuoted;
      out << s;
      break;
    }
    case ordered_json::value_t::boolean:
      out << (j.get<bool>() ? "true" : "false");
      break;
    case ordered_json::value_t::number_integer:
      out << std::to_string(j.get<int64_t>());
      break;
    case ordered_json::value_t::number_unsigned:
      out << std::to_string(j.get<uint64_t>());
      break;
    case ordered_json::value_t::number_float: {
      // The shortest text that reads back as the same double (2/3 too), a float still.
      const double v = j.get<double>();
      std::string text = std::isfinite(v) ? json_number(v) : to_string(Value(v));
      if (std::isfinite(v) && text.find_first_of(".eE") == std::string::npos) text += ".0";
      out << text;
      break;
    }
    default:
      out << YAML::Null;
  }
}

}  // namespace

std::string to_yaml(const ordered_json& config) {
  YAML::Emitter out;
  emit(out, config);
  return std::string(out.c_str()) + "\n";
}

ordered_json read_config_file(const std::string& path) {
  return detail::to_json(detail::load_yaml_file(path, "config file"));  // JSON is YAML
}

std::vector<PlotSpec> plots_of_config(const ordered_json& resolved) {
  std::vector<PlotSpec> plots;
  if (!resolved.is_object() || !resolved.contains("output") || !resolved["output"].is_object()) return plots;
  const ordered_json& output = resolved["output"];
  if (!output.contains("plots") || !output["plots"].is_array()) return plots;
  for (const auto& n : output["plots"]) {
    if (!n.is_object()) continue;
    PlotSpec p;
    p.title = n.contains("title") && n["title"].is_string() ? n["title"].get<std::string>() : "";
    p.x = n.contains("x") && n["x"].is_string() ? n["x"].get<std::string>() : "iteration";
    if (n.contains("ys") && n["ys"].is_array())
      for (const auto& y : n["ys"])
        if (y.is_string()) p.ys.push_back(y.get<std::string>());
    if (!p.ys.empty()) plots.push_back(p);
  }
  return plots;
}

}  // namespace trainyard::host
