#include "util/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <yaml-cpp/yaml.h>

namespace trainyard::host {

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

std::string json_object(const std::map<std::string, double>& values) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : values) {
    out += (first ? "" : ", ") + json_string(k) + ": " + json_number(v);
    first = false;
  }
  return out + "}";
}

namespace {
std::string scalar_json(const std::string& s) {
  if (s == "true" || s == "false") return s;
  if (s == "null" || s == "~") return "null";
  if (!s.empty()) {
    char* end = nullptr;
    std::strtoll(s.c_str(), &end, 10);
    if (*end == '\0') return s;
    double d = std::strtod(s.c_str(), &end);
    if (*end == '\0' && std::isfinite(d) && s.find_first_of("xX") == std::string::npos) return json_number(d);
  }
  return json_string(s);
}
}  // namespace

std::string yaml_to_json(const YAML::Node& node, int indent) {
  const std::string pad(indent + 2, ' '), end_pad(indent, ' ');
  if (node.IsMap()) {
    if (node.size() == 0) return "{}";
    std::string out = "{\n";
    bool first = true;
    for (const auto& kv : node) {
      out += (first ? "" : ",\n") + pad + json_string(kv.first.Scalar()) + ": " + yaml_to_json(kv.second, indent + 2);
      first = false;
    }
    return out + "\n" + end_pad + "}";
  }
  if (node.IsSequence()) {
    if (node.size() == 0) return "[]";
    std::string out = "[\n";
    for (size_t i = 0; i < node.size(); ++i)
      out += (i ? ",\n" : "") + pad + yaml_to_json(node[i], indent + 2);
    return out + "\n" + end_pad + "]";
  }
  if (node.IsScalar()) return node.Tag() == "!" ? json_string(node.Scalar()) : scalar_json(node.Scalar());
  return "null";
}

}  // namespace trainyard::host
