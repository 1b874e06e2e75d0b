#include "util/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

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

}  // namespace trainyard::host
