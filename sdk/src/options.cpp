#include "trainyard/options.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "trainyard/error.h"

// The 0.x calls (Schema::add, Options::get) are deprecated for plugins; this
// file implements them and calls them from one another.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace trainyard {
namespace {
// A value as a message shows it, a long one cut (as the host's quoted_value()).
std::string quoted_value(const std::string& value) {
  if (value.size() <= 80) return "'" + value + "'";
  size_t cut = 60;
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;
  return "'" + value.substr(0, cut) + "...' (" + std::to_string(value.size()) + " bytes)";
}
}  // namespace

const char* type_name(OptionType type) {
  switch (type) {
    case OptionType::boolean:
      return "boolean";
    case OptionType::integer:
      return "integer";
    case OptionType::number:
      return "number";
    case OptionType::string:
      return "string";
    case OptionType::integer_list:
      return "list of integers";
    case OptionType::number_list:
      return "list of numbers";
    case OptionType::string_list:
      return "list of strings";
    case OptionType::path:
      return "path";
  }
  return "?";
}

OptionType type_of(const Value& value) {
  // The variant's alternatives are declared in OptionType's order (path,
  // last, has none of its own: it holds a string).
  return static_cast<OptionType>(value.index());
}

namespace {
std::string number_text(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  std::string t = s.str();
  // Keep "1.0" distinct from the integer 1 when printed back as YAML.
  if (t.find_first_of(".eEn") == std::string::npos) t += ".0";
  return t;
}
template <class T, class F>
std::string list_text(const std::vector<T>& items, F each) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + each(items[i]);
  return out + "]";
}
}  // namespace

std::string to_string(const Value& value) {
  switch (type_of(value)) {
    case OptionType::boolean:
      return std::get<bool>(value) ? "true" : "false";
    case OptionType::integer:
      return std::to_string(std::get<int64_t>(value));
    case OptionType::number:
      return number_text(std::get<double>(value));
    case OptionType::string:
    case OptionType::path:
      return std::get<std::string>(value);
    case OptionType::integer_list:
      return list_text(std::get<std::vector<int64_t>>(value), [](int64_t v) { return std::to_string(v); });
    case OptionType::number_list:
      return list_text(std::get<std::vector<double>>(value), number_text);
    case OptionType::string_list:
      return list_text(std::get<std::vector<std::string>>(value), [](const std::string& v) { return v; });
  }
  return "?";
}

OptionSpec& Schema::push(OptionSpec spec) {
  for (const auto& s : specs_)
    if (s.key == spec.key) throw Error("schema declares option '" + spec.key + "' twice");
  specs_.push_back(std::move(spec));
  return specs_.back();
}

OptionSpec& Schema::add(const std::string& key, Value default_value, const std::string& description) {
  OptionSpec spec;
  spec.key = key;
  spec.type = type_of(default_value);
  spec.description = description;
  spec.default_value = std::move(default_value);
  return push(std::move(spec));
}

OptionSpec& Schema::add(const std::string& key, const char* default_value, const std::string& description) {
  return add(key, Value(std::string(default_value)), description);
}

OptionSpec& Schema::add(const std::string& key, int default_value, const std::string& description) {
  return add(key, Value(static_cast<int64_t>(default_value)), description);
}

OptionSpec& Schema::add(const std::string& key, int64_t default_value, const std::string& description) {
  return add(key, Value(default_value), description);
}

OptionSpec& Schema::add(const std::string& key, double default_value, const std::string& description) {
  return add(key, Value(default_value), description);
}

OptionSpec& Schema::add(const std::string& key, bool default_value, const std::string& description) {
  return add(key, Value(default_value), description);
}

OptionSpec& Schema::require(const std::string& key, OptionType type, const std::string& description) {
  OptionSpec spec;
  spec.key = key;
  spec.type = type;
  spec.description = description;
  return push(std::move(spec));
}

OptionSpec& Schema::add_path(const std::string& key, const std::string& default_value, const std::string& description) {
  OptionSpec& spec = add(key, Value(default_value), description);
  spec.type = OptionType::path;
  return spec;
}

bool OptionSpec::in_range(double v) const {
  if (min_value && (min_exclusive ? v <= *min_value : v < *min_value)) return false;
  if (max_value && (max_exclusive ? v >= *max_value : v > *max_value)) return false;
  return true;
}

std::string OptionSpec::range_text() const {
  const bool integral = type == OptionType::integer || type == OptionType::integer_list;
  auto bound = [&](double v) { return integral ? std::to_string(static_cast<int64_t>(v)) : to_string(Value(v)); };
  if (min_value && max_value && !min_exclusive && !max_exclusive)
    return "between " + bound(*min_value) + " and " + bound(*max_value);
  std::string text;
  if (min_value) text = (min_exclusive ? "above " : "at least ") + bound(*min_value);
  if (max_value)
    text += (text.empty() ? "" : " and ") + std::string(max_exclusive ? "below " : "at most ") + bound(*max_value);
  return text;
}

const OptionSpec* Schema::find(const std::string& key) const {
  for (const auto& s : specs_)
    if (s.key == key) return &s;
  return nullptr;
}

const Value& Options::at(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw Error("option '" + key + "' was not declared in the component's schema");
  return it->second;
}

void Options::require_key(const std::string& key) const {
  if (!has(key)) throw Error("option '" + key + "' is bound to a field but missing from the options given to bind()");
}

void Options::throw_type_mismatch(const std::string& key, const Value& found) {
  throw Error("option '" + key + "' holds a " + type_name(type_of(found)) +
              "; the component asked for another type (a bug in the component)");
}

std::string Extra::get_string(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

double Extra::get_number(const std::string& key, double fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0')
    throw ConfigError("extra." + key + " is not a number", "expected a number, got " + quoted_value(it->second), "");
  return v;
}

int64_t Extra::get_integer(const std::string& key, int64_t fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0')
    throw ConfigError("extra." + key + " is not an integer", "expected an integer, got " + quoted_value(it->second),
                      "");
  return v;
}

bool Extra::get_bool(const std::string& key, bool fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  if (it->second == "true") return true;
  if (it->second == "false") return false;
  throw ConfigError("extra." + key + " is not a boolean", "expected true or false, got " + quoted_value(it->second),
                    "");
}

}  // namespace trainyard
