// Checking YAML values against schemas: types, ranges, choices, unknown keys
// with a "did you mean", missing required keys.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "config/detail/document.h"
#include "trainyard/error.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host::detail {
namespace {

bool parse_number(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || std::isnan(v)) return false;
  out = v;
  return true;
}

// Relative to the experiment file's folder, whether written in the file or
// given with --set: the same (file, --set) names the same files from any
// working directory, so a resume started elsewhere resolves what the run's
// config.yaml holds (docs/experiment-yaml.md, "Relative paths"). Empty
// stays empty.
std::string resolve_path(const Document& document, const std::string& text) {
  if (text.empty()) return "";
  if (text.rfind("pipe:", 0) == 0) return text;  // a command whose output is the file (WebDataset's convention)
  fs::path p = text;
  if (p.is_relative()) p = fs::path(document.folder()) / p;
  return fs::absolute(p).lexically_normal().string();
}

struct Checker {
  const Document& document;
  const OptionSpec& spec;
  const std::string& key;

  void check_range(const YAML::Node& node, double v) const {
    if (!spec.in_range(v))
      fail(document.where(node, key), "value out of range", "expected " + spec.range_text() + ", got " + node.Scalar());
  }
  void check_choice(const YAML::Node& node, const std::string& v) const {
    if (spec.choices.empty()) return;
    for (const auto& c : spec.choices)
      if (c == v) return;
    fail(document.where(node, key), quoted_value(v) + " is not a valid choice",
         "expected one of " + join(spec.choices) + ", got " + quoted_value(v), did_you_mean(v, spec.choices));
  }
  [[noreturn]] void wrong(const YAML::Node& node, const std::string& expected) const {
    fail(document.where(node, key), "wrong type", "expected " + expected + ", got " + shown(node),
         spec.description.empty() ? "" : key + " is: " + spec.description);
  }

  bool boolean(const YAML::Node& n) const {
    if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "false")) return n.Scalar() == "true";
    wrong(n, "a boolean (true or false)");
  }
  int64_t integer(const YAML::Node& n) const {
    int64_t v = 0;
    if (!n.IsScalar() || !parse_integer(n.Scalar(), v)) {
      double d = 0;
      if (n.IsScalar() && parse_number(n.Scalar(), d) && std::isfinite(d) && std::nearbyint(d) == d)
        fail(document.where(n, key), "integer out of range",
             "expected " + (spec.max_value || spec.min_value ? spec.range_text() : std::string("a 64-bit integer")) +
                 ", got " + n.Scalar());
      wrong(n, "an integer");
    }
    check_range(n, static_cast<double>(v));
    return v;
  }
  double number(const YAML::Node& n) const {
    double v = 0;
    if (!n.IsScalar() || !parse_number(n.Scalar(), v)) wrong(n, "a number");
    if (!std::isfinite(v))
      fail(document.where(n, key), "number out of range",
           "expected a finite number (a double holds up to about 1.8e308), got " + n.Scalar());
    check_range(n, v);
    return v;
  }
  std::string string(const YAML::Node& n) const {
    if (!n.IsScalar()) wrong(n, "a string");
    check_choice(n, n.Scalar());
    return n.Scalar();
  }
  std::string path(const YAML::Node& n) const {
    if (!n.IsScalar()) wrong(n, "a path");
    return resolve_path(document, n.Scalar());
  }
  template <class T, class F>
  std::vector<T> list(const YAML::Node& n, const char* what, F each) const {
    if (!n.IsSequence()) wrong(n, std::string("a list of ") + what + " like [1, 2]");
    std::vector<T> out;
    for (const auto& item : n) out.push_back((this->*each)(item));
    return out;
  }

  Value convert(const YAML::Node& n) const {
    switch (spec.type) {
      case OptionType::boolean:
        return boolean(n);
      case OptionType::integer:
        return integer(n);
      case OptionType::number:
        return number(n);
      case OptionType::string:
        return string(n);
      case OptionType::integer_list:
        return list<int64_t>(n, "integers", &Checker::integer);
      case OptionType::number_list:
        return list<double>(n, "numbers", &Checker::number);
      case OptionType::string_list:
        return list<std::string>(n, "strings", &Checker::string);
      case OptionType::path:
        return path(n);
    }
    wrong(n, "a value");
  }
};

}  // namespace

YAML::Node get(const YAML::Node& map, const std::string& key) {
  const YAML::Node& view = map;
  return view[key];
}

OptionSpec host_spec(const std::string& key, OptionType type, std::vector<std::string> choices) {
  OptionSpec spec;
  spec.key = key;
  spec.type = type;
  spec.choices = std::move(choices);
  return spec;
}

Value convert(const Document& document, const OptionSpec& spec, const YAML::Node& node, const std::string& key) {
  return Checker{document, spec, key}.convert(node);
}

Options validate_options(const Document& document, const YAML::Node& map, const std::string& key, const Schema& schema,
                         const std::vector<std::string>& host_keys, const std::string& owner) {
  std::vector<std::string> known = host_keys;
  for (const auto& spec : schema.specs()) known.push_back(spec.key);
  if (map.IsDefined() && !map.IsNull() && !map.IsMap())
    fail(document.where(map, key), "wrong type", "expected a map of options, got " + shown(map));
  if (map.IsDefined() && map.IsMap())
    for (const auto& kv : map) {
      const std::string name = kv.first.Scalar();
      if (std::find(known.begin(), known.end(), name) != known.end()) continue;
      std::string hint = closest(name, known);
      fail(document.where(kv.first, child_key(key, name)), "unknown option for " + owner,
           "expected one of " + join(known) + ", got " + quoted_value(name),
           hint.empty() ? "see 'trainyard describe' for the options" : "did you mean '" + hint + "'?");
    }
  std::map<std::string, Value> values;
  for (const auto& spec : schema.specs()) {
    YAML::Node node = map.IsDefined() && map.IsMap() ? YAML::Node(map[spec.key]) : YAML::Node();
    if (!node.IsDefined() || node.IsNull()) {
      if (spec.required())
        fail(document.where(map, key), "missing required option '" + spec.key + "' for " + owner,
             "expected " + std::string(type_name(spec.type)) + ", got nothing",
             "add " + spec.key + ": (" + spec.description + ")");
      values[spec.key] = spec.type == OptionType::path
                             ? Value(resolve_path(document, std::get<std::string>(*spec.default_value)))
                             : *spec.default_value;
      continue;
    }
    values[spec.key] = convert(document, spec, node, child_key(key, spec.key));
  }
  return Options(std::move(values));
}

}  // namespace trainyard::host::detail
