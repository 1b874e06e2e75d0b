#pragma once
// Minimal JSON output: metrics lines, summary.json, config.json.
#include <map>
#include <string>

namespace YAML {
class Node;
}

namespace trainyard::host {

std::string json_string(const std::string& text);
/// Shortest text that reads back as the same double; NaN and infinities as null.
std::string json_number(double value);
/// {"a": 1.5, "b": 2}
std::string json_object(const std::map<std::string, double>& values);
/// A YAML tree as JSON; scalars that read as integers, numbers or booleans
/// become those, everything else a string.
std::string yaml_to_json(const YAML::Node& node, int indent = 0);

}  // namespace trainyard::host
