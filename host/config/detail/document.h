#pragma once
// Private to host/config/: the experiment's YAML as read, and the checks that
// turn YAML nodes into Options. Nothing outside host/config/ includes this.
#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "trainyard/options.h"

namespace trainyard::host::detail {

/// The YAML as read, with --set applied, and what is needed to point at a line.
struct Document {
  std::string path;
  YAML::Node root;
  std::map<std::string, std::string> set_origins;  ///< key path -> "--set KEY=VALUE"

  /// "FILE:LINE:COL: KEY" for a node read from the file, "--set KEY=VALUE: KEY" for one set.
  std::string where(const YAML::Node& node, const std::string& key) const;
  /// The folder relative paths are resolved against, those in the file and
  /// those given with --set alike.
  std::string folder() const;
};

/// Bounds on a YAML file the host reads: its size, the values it expands to
/// (aliases counted each time they are used) and its nesting.
inline constexpr size_t kMaxYamlBytes = 4u << 20;
inline constexpr size_t kMaxYamlNodes = 100000;
inline constexpr size_t kMaxYamlDepth = 32;

/// The YAML of `path` (`what` names it in messages: "experiment file"),
/// refused with a ConfigError naming FILE:LINE:COL when it is a folder,
/// binary, too large, indented with tabs, has a duplicate key, expands
/// (through aliases) past kMaxYamlNodes, or nests past kMaxYamlDepth.
YAML::Node load_yaml_file(const std::string& path, const std::string& what);
/// The tree checks of load_yaml_file on a parsed value;
/// `origin` starts each message.
void check_yaml_tree(const std::string& origin, const YAML::Node& root);
/// YAML text from anywhere (a file's, a --set value, a flag's map) parsed as
/// load_yaml_file parses a file: nesting bounded before and during the parse
/// (one line naming where), merge keys (<<: *defaults) applied, then the
/// tree checks (duplicate keys with both lines, aliases bounded).
YAML::Node parse_yaml_text(const std::string& origin, const std::string& text);
/// The offset of the first byte of `text` that is not part of well-formed
/// UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), or
/// std::string::npos. Every key and value is UTF-8 text: config.yaml and
/// provenance.json are written from them and must read back.
size_t first_invalid_utf8(const std::string& text);
/// "0xe9": how messages name a byte that is not text.
std::string byte_text(unsigned char byte);

/// The sections an experiment may have.
extern const std::vector<std::string> kTopLevelKeys;

/// plugin_dirs from the file, made absolute relative to the file's folder.
std::vector<std::string> plugin_dirs_of(const Document& document);

/// Every key path under `root` -> "FILE:LINE:COL" or "--set KEY=VALUE".
std::map<std::string, std::string> locations_of(const Document& document);

/// The value of the longest key-path prefix of `key` ("loop.epochs", then
/// "loop") that `entries` holds, or null.
const std::string* nearest_entry(const std::map<std::string, std::string>& entries, const std::string& key);

std::string child_key(const std::string& parent, const std::string& key);
std::string index_key(const std::string& parent, size_t i);
/// "'relu'", "a list", "a map", "nothing": a node, as messages show it.
std::string shown(const YAML::Node& node);
std::vector<std::string> map_keys(const YAML::Node& node);
bool parse_integer(const std::string& s, int64_t& out);
/// map[key], read through a const view so that nothing is inserted.
YAML::Node get(const YAML::Node& map, const std::string& key);
/// The spec of a host key (on_bad_record, phases, plots' x, ...), checked
/// like a schema's option.
OptionSpec host_spec(const std::string& key, OptionType type, std::vector<std::string> choices = {});

[[noreturn]] void fail(const std::string& where, const std::string& what, const std::string& expected_got,
                       const std::string& hint = "");

/// One value checked against its spec: type, range, choices. A path option is
/// made absolute against the document's folder (also when given with --set).
Value convert(const Document& document, const OptionSpec& spec, const YAML::Node& node, const std::string& key);

/// Checks `map` against `schema` (skipping `host_keys`) and returns the values
/// with defaults filled in. `key` is the map's key path, for messages.
Options validate_options(const Document& document, const YAML::Node& map, const std::string& key, const Schema& schema,
                         const std::vector<std::string>& host_keys, const std::string& owner);

/// YAML to JSON: quoted scalars stay strings, plain ones that read as
/// booleans, integers or numbers become those.
nlohmann::ordered_json to_json(const YAML::Node& node);
/// A plain (unquoted) YAML scalar as JSON: a boolean, null, integer or
/// number when it reads as one, else a string.
nlohmann::ordered_json plain_scalar(const std::string& text);
/// A value as JSON of its type (paths and strings as strings).
nlohmann::ordered_json to_json(const Value& value);

}  // namespace trainyard::host::detail
