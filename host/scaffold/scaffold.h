#pragma once
// `trainyard new-plugin NAME --kind KIND`: an out-of-tree plugin project
// (CMakeLists.txt using find_package(Trainyard), one source with the entry
// point and a working component of that kind with a typed schema, a README)
// that builds against the installed SDK and loads as it is.
//
// The project is made from the template files in host/scaffold/templates/
// (installed as PREFIX/share/trainyard/scaffold; a host in the build tree reads the
// source tree's; TRAINYARD_SCAFFOLD_DIR overrides both): CMakeLists.txt.in,
// plugin.cpp.in and README.md.in frame every project, kinds/KIND.cpp.in is
// the kind's component and register_components(), kinds/KIND.yaml.in its
// experiment lines for the README. In them, @COMPONENT@ (plugin.cpp.in),
// @EXAMPLE_YAML@, @SDK_MAJOR_MINOR@, @SDK_VERSION@ and @API_VERSION@ are
// filled in first; then NAME_ becomes the plugin name in CamelCase (class
// names), NAME the plugin name and KIND the kind, in file names too.
#include <map>
#include <string>
#include <vector>

namespace trainyard::host {

/// network, dataset, loss, optimizer, meter, callback, additional_override.
const std::vector<std::string>& scaffold_kinds();

/// File name -> content. Throws ConfigError for a bad name or kind, and for a
/// template folder that is missing or lacks a template (naming the folder).
std::map<std::string, std::string> plugin_project(const std::string& name, const std::string& kind);

}  // namespace trainyard::host
