#pragma once
// `trainyard new-plugin NAME --kind KIND`: an out-of-tree plugin project
// (CMakeLists.txt using find_package(Trainyard), one source with the entry
// point and a working component of that kind with a schema, a README) that
// builds against the installed SDK and loads as it is.
#include <map>
#include <string>
#include <vector>

namespace trainyard::host {

/// network, dataset, loss, optimizer, meter, callback, additional_override.
const std::vector<std::string>& scaffold_kinds();

/// File name -> content. Throws ConfigError for a bad name or kind.
std::map<std::string, std::string> plugin_project(const std::string& name, const std::string& kind);

}  // namespace trainyard::host
