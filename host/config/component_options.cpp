#include "config/component_options.h"

#include <yaml-cpp/yaml.h>

#include "config/experiment.h"
#include "trainyard/error.h"

namespace trainyard::host {

Options component_options(const Schema& schema, const std::map<std::string, Value>& values,
                          const std::string& yaml_flow_map, const std::string& what) {
  YAML::Node map(YAML::NodeType::Map);
  for (const auto& [key, value] : values) {
    if (const auto* text = std::get_if<std::string>(&value)) {
      map[key] = *text;  // as is: a path may hold ':' or '#'
    } else if (const auto* texts = std::get_if<std::vector<std::string>>(&value)) {
      YAML::Node list(YAML::NodeType::Sequence);
      for (const auto& t : *texts) list.push_back(t);
      map[key] = list;
    } else {
      map[key] = YAML::Load(to_string(value));
    }
  }
  if (!yaml_flow_map.empty()) {
    YAML::Node given;
    try {
      given = YAML::Load(yaml_flow_map);
    } catch (const YAML::Exception& err) {
      throw ConfigError(what + ": not valid YAML: " + std::string(err.what()),
                        "expected a map such as '{mean: [0.286], std: [0.353]}'", "");
    }
    if (!given.IsMap()) throw ConfigError(what + ": not a map", "expected a map such as '{mean: [0.286]}'", "");
    for (const auto& kv : given) map[kv.first.Scalar()] = kv.second;
  }
  ExperimentSource source;
  source.path = what;
  return validate_options(source, map, what, schema, {}, what);
}

}  // namespace trainyard::host
