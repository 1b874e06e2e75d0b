#pragma once
// Minimal JSON output: metrics lines, summary.json.
#include <map>
#include <string>

namespace trainyard::host {

std::string json_string(const std::string& text);
/// Shortest text that reads back as the same double; NaN and infinities as null.
std::string json_number(double value);
/// {"a": 1.5, "b": 2}
std::string json_object(const std::map<std::string, double>& values);

}  // namespace trainyard::host
