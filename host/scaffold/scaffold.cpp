#include "scaffold/scaffold.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "trainyard/error.h"
#include "trainyard/version.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

// The template folder, why it is the one and how to mend it: what the
// error says when a template is not there.
struct TemplateFolder {
  fs::path path;
  std::string origin, hint;
};

TemplateFolder template_folder() {
  const std::string or_set = "or set TRAINYARD_SCAFFOLD_DIR to a folder holding them";
  if (const char* env = std::getenv("TRAINYARD_SCAFFOLD_DIR"); env && *env)
    return {env, "TRAINYARD_SCAFFOLD_DIR",
            "point TRAINYARD_SCAFFOLD_DIR at a folder holding them (PREFIX/share/trainyard/scaffold), or unset it"};
  std::error_code error;
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe", error).parent_path();
  // Executables of the build tree read the source tree (an edited template
  // needs no rebuild); an installed host reads only its own prefix, so a
  // broken install is not hidden by a source tree that happens to exist.
  if (!error && fs::equivalent(exe_dir, TRAINYARD_BUILD_RUNTIME_DIR, error))
    return {TRAINYARD_SCAFFOLD_SOURCE_DIR, "source tree: this host runs from the build tree",
            "restore host/scaffold/templates/ in the source tree, " + or_set};
  return {
      exe_dir.parent_path() / TRAINYARD_INSTALLED_SCAFFOLD_DIR, "installed with this host",
      "reinstall trainyard (cmake --install BUILD --prefix PREFIX puts them in share/trainyard/scaffold), " + or_set};
}

std::string read_template(const TemplateFolder& folder, const std::string& file) {
  std::ifstream in(folder.path / file, std::ios::binary);
  if (!in) {
    const bool folder_missing = !fs::is_directory(folder.path);
    throw ConfigError("new-plugin: template folder " + folder.path.string() + " (" + folder.origin + ") " +
                          (folder_missing ? "does not exist" : "has no " + file),
                      "expected the project templates there: CMakeLists.txt.in, plugin.cpp.in, README.md.in and "
                      "kinds/KIND.cpp.in, kinds/KIND.yaml.in for each of " +
                          join(scaffold_kinds()),
                      folder.hint);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// A template file ends with a newline; where it is inserted into another, the
// surrounding template decides the line breaks.
std::string without_final_newlines(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// NAME_Network -> MyNetNetwork: a class name from the plugin name.
std::string camel_case(const std::string& name) {
  std::string camel;
  bool up = true;
  for (char c : name) {
    if (c == '_') {
      up = true;
      continue;
    }
    camel += up ? char(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return camel;
}

}  // namespace

const std::vector<std::string>& scaffold_kinds() {
  static const std::vector<std::string> kinds = {
      "network", "dataset", "loss", "optimizer", "meter", "callback", "additional_override"};
  return kinds;
}

std::map<std::string, std::string> plugin_project(const std::string& name, const std::string& kind) {
  if (!std::regex_match(name, std::regex("[a-z][a-z0-9_]{0,62}")))
    throw ConfigError("new-plugin: name '" + name + "'",
                      "expected lowercase letters, digits and '_', starting with a letter (it names the library "
                      "and the component)",
                      "e.g. my_network");
  const auto& kinds = scaffold_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
    throw ConfigError("new-plugin: --kind '" + kind + "'", "expected one of " + join(kinds), did_you_mean(kind, kinds));

  const TemplateFolder folder = template_folder();
  std::map<std::string, std::string> files;  // template file -> project file
  files["CMakeLists.txt"] = read_template(folder, "CMakeLists.txt.in");
  files["NAME.cpp"] = replace_all(read_template(folder, "plugin.cpp.in"), "@COMPONENT@",
                                  without_final_newlines(read_template(folder, "kinds/" + kind + ".cpp.in")));
  files["README.md"] = read_template(folder, "README.md.in");
  const std::map<std::string, std::string> placeholders = {
      {"@EXAMPLE_YAML@", without_final_newlines(read_template(folder, "kinds/" + kind + ".yaml.in"))},
      {"@SDK_MAJOR_MINOR@", TRAINYARD_STR(TRAINYARD_VERSION_MAJOR) "." TRAINYARD_STR(TRAINYARD_VERSION_MINOR)},
      {"@SDK_VERSION@", sdk_version()},
      {"@API_VERSION@", sdk_api_version()}};
  const std::regex placeholder("@[A-Z_]+@");
  std::map<std::string, std::string> project;
  for (auto& [file, text] : files) {
    for (const auto& [from, to] : placeholders) text = replace_all(text, from, to);
    std::smatch unknown;
    if (std::regex_search(text, unknown, placeholder))
      throw ConfigError("new-plugin: the " + kind + " templates in " + folder.path.string() + " use " + unknown.str() +
                            " (in what becomes " + file + ")",
                        "expected only @COMPONENT@ (plugin.cpp.in), @EXAMPLE_YAML@, @SDK_MAJOR_MINOR@, "
                        "@SDK_VERSION@ and @API_VERSION@",
                        "fix the template");
    // NAME_ first: it makes class names, NAME alone the plugin's own name.
    text = replace_all(text, "NAME_", camel_case(name));
    text = replace_all(replace_all(text, "NAME", name), "KIND", kind);
    project[replace_all(file, "NAME", name)] = text;
  }
  return project;
}

}  // namespace trainyard::host
