// Reading the experiment file, applying --set KEY=VALUE, and pointing at the
// line a key came from.
#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "config/detail/document.h"
#include "config/experiment.h"
#include "trainyard/error.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace detail {

const std::vector<std::string> kTopLevelKeys = {"name",      "seed",       "plugin_dirs", "dataset",
                                                "network",   "loss",       "optimizer",   "meters",
                                                "callbacks", "overrides",  "loop",        "distributed",
                                                "output",    "checkpoint", "extra",       "resolved_plugins",
                                                "schedule",  "stopping",   "stages",      "resolved_precision",
                                                "ema"};

namespace {
// Sections a --set may create when the file has none.
const std::vector<std::string> kSectionMaps = {"dataset", "network", "loss",     "optimizer", "loop", "distributed",
                                               "output",  "extra",   "schedule", "stopping",  "ema",  "checkpoint"};

std::string position(const std::string& path, const YAML::Mark& mark) {
  return path + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

void locate(const Document& document, const YAML::Node& node, const std::string& key, const std::string* origin,
            std::map<std::string, std::string>& out) {
  if (!key.empty()) {
    if (auto it = document.set_origins.find(key); it != document.set_origins.end()) origin = &it->second;
    if (origin)
      out[key] = *origin;
    else if (!node.Mark().is_null())
      out[key] = position(document.path, node.Mark());
  }
  if (node.IsMap())
    for (const auto& kv : node) locate(document, kv.second, child_key(key, kv.first.Scalar()), origin, out);
  else if (node.IsSequence())
    for (size_t i = 0; i < node.size(); ++i) locate(document, node[i], index_key(key, i), origin, out);
}
}  // namespace

std::string child_key(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}
std::string index_key(const std::string& parent, size_t i) { return parent + "[" + std::to_string(i) + "]"; }

std::string shown(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsScalar()) return quoted_value(node.Scalar());
  if (node.IsSequence()) return "a list";
  return "a map";
}

std::vector<std::string> map_keys(const YAML::Node& node) {
  std::vector<std::string> keys;
  if (node.IsMap())
    for (const auto& kv : node) keys.push_back(kv.first.Scalar());
  return keys;
}

bool parse_integer(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  out = v;
  return true;
}

void fail(const std::string& where, const std::string& what, const std::string& expected_got, const std::string& hint) {
  throw ConfigError(where + ": " + what, expected_got, hint);
}

const std::string* nearest_entry(const std::map<std::string, std::string>& entries, const std::string& key) {
  for (std::string k = key;;) {
    if (auto it = entries.find(k); it != entries.end()) return &it->second;
    size_t cut = k.find_last_of(".[");
    if (cut == std::string::npos) return nullptr;
    k = k.substr(0, cut);
  }
}

std::string Document::where(const YAML::Node& node, const std::string& key) const {
  // A --set that replaced the key or a map above it wins over the file.
  if (const std::string* origin = nearest_entry(set_origins, key)) return *origin + ": " + key;
  if (node.IsDefined() && !node.Mark().is_null()) return position(path, node.Mark()) + (key.empty() ? "" : ": " + key);
  return path + (key.empty() ? "" : ": " + key);
}

std::string Document::folder() const { return fs::absolute(path).parent_path().lexically_normal().string(); }

std::map<std::string, std::string> locations_of(const Document& document) {
  std::map<std::string, std::string> out;
  locate(document, document.root, "", nullptr, out);
  return out;
}

}  // namespace detail

using namespace detail;

ExperimentSource read_experiment(const std::string& path, const std::vector<std::string>& sets) {
  auto document = std::make_shared<Document>();
  Document& source = *document;
  source.path = path;
  source.root = load_yaml_file(path, "experiment file");
  if (!source.root.IsMap())
    throw ConfigError(path + ": the experiment must be a map of sections",
                      "expected keys like name, dataset, network, got " + shown(source.root),
                      "see docs/experiment-yaml.md");

  for (const auto& set : sets) {
    const size_t eq = set.find('=');
    // Checked first: the message must not carry the bytes, and a run's config.yaml must read back.
    if (const size_t bad = first_invalid_utf8(set); bad != std::string::npos) {
      const std::string key = set.substr(0, eq);
      const bool in_value = eq != std::string::npos && bad > eq && first_invalid_utf8(key) == std::string::npos;
      const std::string byte = byte_text(static_cast<unsigned char>(set[bad]));
      throw ConfigError(in_value ? "--set " + key + ": the value is not UTF-8 text (byte " + byte + " at offset " +
                                       std::to_string(bad - eq - 1) + " of the value)"
                                 : "--set: a key is not UTF-8 text (byte " + byte + ")",
                        "expected UTF-8 text", "write it in UTF-8 (a run's config.yaml must read back)");
    }
    // A pasted value can be long: the origin every message starts with shows it cut.
    const std::string origin =
        "--set " +
        (eq == std::string::npos || set.size() <= 120 ? set : set.substr(0, eq + 1) + quoted_value(set.substr(eq + 1)));
    if (eq == std::string::npos || eq == 0)
      throw ConfigError(origin + ": not KEY=VALUE", "expected e.g. --set optimizer.lr=0.1, got " + quoted_value(set),
                        "");
    const std::string dotted = set.substr(0, eq), text = set.substr(eq + 1);
    const YAML::Node value = parse_yaml_text(origin, text);
    if (value.IsNull())  // nothing after '=', or only blanks
      throw ConfigError(origin + ": empty value", "expected a value after '='", "");

    auto segments = split(dotted, '.');
    YAML::Node current = source.root;
    std::string key;
    for (size_t i = 0; i < segments.size(); ++i) {
      const std::string& seg = segments[i];
      const bool last = i + 1 == segments.size();
      if (seg.empty()) throw ConfigError(origin + ": empty key segment in '" + dotted + "'", "expected a.b.c", "");
      if (current.IsSequence()) {
        int64_t index = -1;
        if (!parse_integer(seg, index) || index < 0 || index >= static_cast<int64_t>(current.size()))
          throw ConfigError(origin + ": " + key + " is a list of " + std::to_string(current.size()) + " entries",
                            "expected an index 0.." + std::to_string(static_cast<int64_t>(current.size()) - 1) +
                                ", got " + quoted_value(seg),
                            "");
        key = index_key(key, static_cast<size_t>(index));
        if (last) {
          current[static_cast<size_t>(index)] = value;
        } else {
          YAML::Node next = current[static_cast<size_t>(index)];
          current.reset(next);
        }
        continue;
      }
      if (!current.IsMap())
        throw ConfigError(origin + ": " + key + " is " + shown(current) + ", not a map", "expected a key under a map",
                          "");
      const YAML::Node& view = current;
      const std::string here = child_key(key, seg);
      if (last) {
        current[seg] = value;
      } else if (view[seg].IsDefined()) {
        YAML::Node next = current[seg];
        current.reset(next);
      } else if (key.empty() && std::find(kSectionMaps.begin(), kSectionMaps.end(), seg) != kSectionMaps.end()) {
        current[seg] = YAML::Node(YAML::NodeType::Map);
        YAML::Node next = current[seg];
        current.reset(next);
      } else {
        auto keys = key.empty() ? kTopLevelKeys : map_keys(current);
        throw ConfigError(
            origin + ": key '" + here + "' does not exist",
            "expected one of " + join(keys) + (key.empty() ? "" : " under " + key) + ", got " + quoted_value(seg),
            did_you_mean(seg, keys));
      }
      key = here;
    }
    source.set_origins[key] = origin;
  }
  return ExperimentSource{path, std::move(document)};
}

std::vector<std::string> experiment_plugin_dirs(const ExperimentSource& source) {
  return plugin_dirs_of(*source.document);
}

std::vector<std::string> detail::plugin_dirs_of(const Document& document) {
  std::vector<std::string> dirs;
  const YAML::Node& root = document.root;
  YAML::Node node = root["plugin_dirs"];
  if (!node.IsDefined() || node.IsNull()) return dirs;
  if (!node.IsSequence())
    fail(document.where(node, "plugin_dirs"), "wrong type", "expected a list of folders, got " + shown(node));
  // Absolute, so that a saved config.yaml finds them from anywhere.
  const fs::path base = document.folder();
  for (size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar())
      fail(document.where(node[i], index_key("plugin_dirs", i)), "wrong type",
           "expected a folder, got " + shown(node[i]));
    fs::path p = node[i].Scalar();
    dirs.push_back((p.is_absolute() ? p : base / p).lexically_normal().string());
  }
  return dirs;
}

}  // namespace trainyard::host
