#pragma once
// Options for a component built outside an experiment file (predict's input
// dataset): checked against its schema exactly as options in a file are.
#include <map>
#include <string>

#include "trainyard/options.h"

namespace trainyard::host {

/// `values` plus a command-line YAML flow map (e.g. "{mean: [0.286]}", may be
/// empty; its keys win), validated against `schema`; errors name `what`.
Options component_options(const Schema& schema, const std::map<std::string, Value>& values,
                          const std::string& yaml_flow_map, const std::string& what);

}  // namespace trainyard::host
