// Reading a YAML file the way a config must be read: as text first (not a
// folder, not binary, not huge, no tabs in the indentation), then parsed, then
// walked once under a budget (duplicate keys, alias expansion, nesting depth)
// before anything else looks at it. yaml-cpp accepts duplicate keys and
// shares aliased nodes, so a later walk would otherwise see the first key of
// a duplicate pair and expand a billion-laughs file without bound.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/depthguard.h>

#include "config/detail/document.h"
#include "trainyard/error.h"

namespace fs = std::filesystem;

namespace trainyard::host::detail {
namespace {

std::string at(const std::string& path, size_t line, size_t column) {
  return path + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::string mark_of(const std::string& path, const YAML::Mark& mark) {
  return mark.is_null() ? path : at(path, static_cast<size_t>(mark.line) + 1, static_cast<size_t>(mark.column) + 1);
}

// The length of a well-formed UTF-8 sequence starting at s[i], or 0.
size_t utf8_length(const std::string& s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t code = n == 1 ? c : c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b >> 6) != 0x2) return 0;
    code = code << 6 | (b & 0x3F);
  }
  static constexpr uint32_t kLeast[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kLeast[n] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
    return 0;  // overlong, too large, surrogate
  return n;
}

// A key or value that is not UTF-8 text, named by its key.
void check_utf8(const std::string& where, const std::string& what, const std::string& text) {
  const size_t bad = first_invalid_utf8(text);
  if (bad == std::string::npos) return;
  throw ConfigError(where + ": " + what + " is not UTF-8 text (byte " +
                        byte_text(static_cast<unsigned char>(text[bad])) + " at offset " + std::to_string(bad) + ")",
                    "expected UTF-8 text", "write it in UTF-8 (a run's config.yaml must read back)");
}

void check_text(const std::string& path, const std::string& text) {
  size_t line = 1, column = 1;
  bool indentation = true;  // still in the leading whitespace of the line
  for (size_t i = 0; i < text.size();) {
    const char ch = text[i];
    const size_t n = utf8_length(text, i);
    if (ch == '\0' || n == 0) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(ch)));
      throw ConfigError(at(path, line, column) + ": not a text file (byte " + byte + ")",
                        "expected a YAML text file in UTF-8, found binary data", "check the path");
    }
    if (ch == '\t' && indentation)
      throw ConfigError(at(path, line, column) + ": a tab in the indentation",
                        "expected spaces for indentation (YAML does not allow tabs there), found a tab",
                        "replace the tab with spaces");
    if (ch == '\n') {
      ++line, column = 1, indentation = true;
    } else {
      if (ch != ' ' && ch != '\t') indentation = false;
      ++column;
    }
    i += n;
  }
}

// One walk of the parsed tree, counting every node it reaches: an alias is
// counted each time it is reached, as any later reader would expand it.
struct Walk {
  const std::string& path;
  size_t nodes = 0;

  void visit(const YAML::Node& node, const std::string& key, size_t depth) {
    if (++nodes > kMaxYamlNodes)
      throw ConfigError(mark_of(path, node.Mark()) + ": " + (key.empty() ? "the document" : key) +
                            " expands to more than " + std::to_string(kMaxYamlNodes) + " values",
                        "expected an experiment of ordinary size; aliases (*name) are expanded wherever they are used",
                        "use fewer or smaller aliases");
    if (depth > kMaxYamlDepth)
      throw ConfigError(
          mark_of(path, node.Mark()) + ": " + key + ": nested deeper than " + std::to_string(kMaxYamlDepth) + " levels",
          "expected at most " + std::to_string(kMaxYamlDepth) + " levels of maps and lists", "");
    if (node.IsMap()) {
      std::map<std::string, YAML::Mark> seen;
      for (const auto& kv : node) {
        if (!kv.first.IsScalar())
          throw ConfigError(mark_of(path, kv.first.Mark()) + ": " + (key.empty() ? "a key" : "a key under " + key) +
                                " is " + shown(kv.first),
                            "expected keys that are plain names", "");
        const std::string name = kv.first.Scalar();
        check_utf8(mark_of(path, kv.first.Mark()), key.empty() ? "a key" : "a key under " + key, name);
        auto [it, fresh] = seen.emplace(name, kv.first.Mark());
        if (!fresh)
          throw ConfigError(mark_of(path, kv.first.Mark()) + ": " + child_key(key, name) + ": duplicate key",
                            "expected each key once in a map, found '" + name + "' again (first at line " +
                                std::to_string(it->second.line + 1) + ", column " +
                                std::to_string(it->second.column + 1) + ")",
                            "keep one of the two; YAML does not merge them");
        visit(kv.second, child_key(key, name), depth + 1);
      }
    } else if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) visit(node[i], index_key(key, i), depth + 1);
    } else if (node.IsScalar()) {
      // An escape ("\ud800") can make bytes the file's own text check never saw.
      check_utf8(mark_of(path, node.Mark()), key.empty() ? "the value" : "the value of " + key, node.Scalar());
    }
  }
};

// YAML 1.1 merge keys: `test: {<<: *train, split: test}` takes every key of
// the aliased map that the map does not set itself (a list of maps: the
// earlier ones first). yaml-cpp reads `<<` as a plain key, which would reach
// the schema as an unknown option or be silently ignored.
struct Merges {
  const std::string& path;
  size_t nodes = 0;

  void apply(YAML::Node node, size_t depth) {
    if (++nodes > kMaxYamlNodes || depth > kMaxYamlDepth) return;  // the walk that follows names the bound
    if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) apply(node[i], depth + 1);
      return;
    }
    if (!node.IsMap()) return;
    std::vector<YAML::Node> sources;
    bool merges = false;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar() || kv.first.Scalar() != "<<" || kv.first.Tag() == "!") continue;
      merges = true;
      const YAML::Node& from = kv.second;
      if (from.IsMap()) {
        sources.push_back(from);
      } else if (from.IsSequence() &&
                 std::all_of(from.begin(), from.end(), [](const YAML::Node& n) { return n.IsMap(); })) {
        for (const auto& n : from) sources.push_back(n);
      } else {
        throw ConfigError(mark_of(path, kv.first.Mark()) + ": a merge key (<<) with " + shown(from),
                          "expected a map or a list of maps after <<:, usually an alias such as <<: *defaults "
                          "(with &defaults on the map to copy)",
                          "");
      }
    }
    if (merges) {
      std::vector<std::string> own;
      for (const auto& kv : node)
        if (kv.first.Scalar() != "<<") own.push_back(kv.first.Scalar());
      node.remove("<<");
      for (const auto& from : sources)
        for (const auto& kv : from) {
          const std::string key = kv.first.Scalar();
          if (std::find(own.begin(), own.end(), key) != own.end()) continue;
          own.push_back(key);
          node[key] = kv.second;
        }
    }
    for (auto kv : node) apply(kv.second, depth + 1);
  }
};

// The flow depth ([ and { outside quotes and comments) before yaml-cpp
// parses: its recursive parser gives "bad file" or overflows the stack on a
// file of thousands of nested brackets.
void check_flow_depth(const std::string& path, const std::string& text) {
  size_t depth = 0, line = 1, column = 1;
  char quote = 0;
  bool comment = false;
  for (char ch : text) {
    if (ch == '\n') {
      ++line, column = 1, comment = false;
      continue;
    }
    if (!comment) {
      if (quote) {
        if (ch == quote) quote = 0;
      } else if (ch == '"' || ch == '\'') {
        quote = ch;
      } else if (ch == '#') {
        comment = true;
      } else if (ch == '[' || ch == '{') {
        if (++depth > kMaxYamlDepth)
          throw ConfigError(
              at(path, line, column) + ": nested deeper than " + std::to_string(kMaxYamlDepth) + " levels",
              "expected at most " + std::to_string(kMaxYamlDepth) + " levels of maps and lists", "");
      } else if ((ch == ']' || ch == '}') && depth > 0) {
        --depth;
      }
    }
    ++column;
  }
}

}  // namespace

void check_yaml_tree(const std::string& origin, const YAML::Node& root) { Walk{origin}.visit(root, "", 0); }

YAML::Node parse_yaml_text(const std::string& origin, const std::string& text) {
  check_flow_depth(origin, text);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // Block nesting ("- - - - x", or indentation) past yaml-cpp's own limit,
    // which it reports as "bad file".
    throw ConfigError(mark_of(origin, e.mark) + ": nested deeper than " + std::to_string(kMaxYamlDepth) + " levels",
                      "expected at most " + std::to_string(kMaxYamlDepth) + " levels of maps and lists", "");
  } catch (const YAML::ParserException& e) {
    throw ConfigError(mark_of(origin, e.mark) + ": YAML syntax error: " + e.msg, "expected valid YAML",
                      "fix the line shown");
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin + ": cannot read: " + e.what(), "expected a readable YAML file", "");
  }
  Merges{origin}.apply(root, 0);
  check_yaml_tree(origin, root);
  return root;
}

std::string byte_text(unsigned char byte) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", static_cast<unsigned>(byte));
  return text;
}

size_t first_invalid_utf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string::npos;
}

YAML::Node load_yaml_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (fs::is_directory(status))
    throw ConfigError(path + ": is a folder", "expected " + what + " (a YAML file), found a folder",
                      "give the file inside it");
  if (!fs::exists(status))
    throw ConfigError(path + ": " + what + " does not exist", "expected a YAML file", "check the path");
  if (!fs::is_regular_file(status))
    throw ConfigError(path + ": not a regular file", "expected " + what + " (a YAML file)", "");
  const auto size = fs::file_size(path, ec);
  if (!ec && size > kMaxYamlBytes)
    throw ConfigError(path + ": " + std::to_string(size) + " bytes",
                      "expected " + what + " of at most " + std::to_string(kMaxYamlBytes) + " bytes", "check the path");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot read " + what, "expected a readable file", "check its permissions");
  std::ostringstream buffer;
  buffer << in.rdbuf();  // sets failbit on an empty file: told apart below, not as unreadable
  if (in.bad())
    throw ConfigError(path + ": cannot read " + what, "expected a readable file", "check the disk and the file");
  const std::string text = buffer.str();
  check_text(path, text);
  YAML::Node root = parse_yaml_text(path, text);
  if (root.IsNull()) {  // no document: 0 bytes, blank lines, or comments only
    const bool blank = text.find_first_not_of(" \t\r\n") == std::string::npos;
    throw ConfigError(path + ": the " + what + " is empty" +
                          (text.empty() ? ""
                           : blank      ? " (only blank lines)"
                                        : " (only comments)"),
                      "expected YAML with name:, dataset:, network:, ...",
                      "see experiments/ or docs/experiment-yaml.md for a complete one");
  }
  return root;
}

}  // namespace trainyard::host::detail
