#include "util/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace trainyard::host {

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

double shortest_float(float value) {
  if (!std::isfinite(value)) return value;
  char buf[32];
  for (int precision = 6; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(value));
    if (std::strtof(buf, nullptr) == value) break;
  }
  return std::strtod(buf, nullptr);
}

nlohmann::ordered_json json_value(double value) {
  if (!std::isfinite(value)) return nullptr;
  // Counts stay counts: 2 rather than 2.0 (exact up to 2^53).
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) return static_cast<int64_t>(value);
  return value;
}

namespace {

void write(const nlohmann::ordered_json& j, bool lines, std::string& out) {
  if (j.is_object() || j.is_array()) {
    const bool object = j.is_object();
    out += object ? '{' : '[';
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      out += first ? (lines ? "\n  " : "") : (lines ? ",\n  " : ", ");
      first = false;
      if (object) out += nlohmann::ordered_json(it.key()).dump() + ": ";
      write(*it, false, out);
    }
    if (lines && !first) out += '\n';
    out += object ? '}' : ']';
    return;
  }
  out += j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

std::string json_text(const nlohmann::ordered_json& value, bool one_key_per_line) {
  std::string out;
  write(value, one_key_per_line, out);
  return out;
}

nlohmann::ordered_json parse_json(const std::string& text) {
  return nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
}

nlohmann::ordered_json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  return nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
}

}  // namespace trainyard::host
