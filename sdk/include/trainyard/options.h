#pragma once
/// Typed, introspectable component options.
///
/// A component declares a Schema: each option's key, type, default (or
/// "required"), description and constraints. The host validates the YAML
/// against it before anything is built (unknown keys with a "did you mean",
/// wrong types, ranges, one-of choices, missing required keys), fills in the
/// defaults, prints it for `trainyard describe NAME`, and hands the component
/// an Options holding exactly the declared keys. YAML types never cross the
/// plugin boundary.
///
/// Example:
///   trainyard::Schema schema;
///   schema.add("hidden_sizes", std::vector<int64_t>{256, 128}, "hidden layer widths").min(1);
///   schema.add("activation", "relu", "activation function").one_of({"relu", "tanh", "gelu"});
///   schema.add("dropout", 0.0, "dropout probability after each hidden layer").range(0.0, 1.0);
///   schema.require("lr", trainyard::OptionType::number, "learning rate").min(0.0);
///   ...
///   auto sizes = options.get<std::vector<int64_t>>("hidden_sizes");

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace trainyard {

enum class OptionType { boolean, integer, number, string, integer_list, number_list, string_list };

/// "integer", "list of numbers", ...: how types are named in messages and docs.
const char* type_name(OptionType type);

/// One option value. The alternative held always matches the option's type.
using Value = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                           std::vector<double>, std::vector<std::string>>;

/// The type a Value holds.
OptionType type_of(const Value& value);
/// A value as it would be written in YAML: 0.1, [256, 128], relu, true.
std::string to_string(const Value& value);

/// One declared option.
struct OptionSpec {
  std::string key;
  OptionType type = OptionType::string;
  std::string description;
  std::optional<Value> default_value;  ///< empty: the key is required
  std::optional<double> min_value;     ///< integers and numbers, and each element of their lists
  std::optional<double> max_value;
  std::vector<std::string> choices;    ///< strings, and each element of string lists

  OptionSpec& min(double v) { min_value = v; return *this; }
  OptionSpec& max(double v) { max_value = v; return *this; }
  OptionSpec& range(double lo, double hi) { min_value = lo; max_value = hi; return *this; }
  OptionSpec& one_of(std::vector<std::string> c) { choices = std::move(c); return *this; }
  bool required() const { return !default_value.has_value(); }
};

/// The options a component accepts, in declaration order.
class Schema {
 public:
  /// An optional key; its type is the default's type. The int, int64_t,
  /// double, bool and const char* overloads keep a literal default from
  /// converting to another type (true must not become an integer).
  OptionSpec& add(const std::string& key, Value default_value, const std::string& description);
  OptionSpec& add(const std::string& key, const char* default_value, const std::string& description);
  OptionSpec& add(const std::string& key, int default_value, const std::string& description);
  OptionSpec& add(const std::string& key, int64_t default_value, const std::string& description);
  OptionSpec& add(const std::string& key, double default_value, const std::string& description);
  OptionSpec& add(const std::string& key, bool default_value, const std::string& description);
  /// A key the user must give.
  OptionSpec& require(const std::string& key, OptionType type, const std::string& description);

  const std::vector<OptionSpec>& specs() const { return specs_; }
  const OptionSpec* find(const std::string& key) const;

 private:
  OptionSpec& push(OptionSpec spec);
  std::vector<OptionSpec> specs_;
};

/// Validated values for every key of a component's schema.
class Options {
 public:
  Options() = default;
  explicit Options(std::map<std::string, Value> values) : values_(std::move(values)) {}

  /// The value of a declared key. Throws trainyard::Error naming the key if it
  /// is absent or of another type (a bug in the component, not user input).
  template <class T>
  const T& get(const std::string& key) const {
    const Value& v = at(key);
    if (const T* p = std::get_if<T>(&v)) return *p;
    throw_type_mismatch(key, v);
  }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const std::map<std::string, Value>& values() const { return values_; }

 private:
  const Value& at(const std::string& key) const;
  [[noreturn]] static void throw_type_mismatch(const std::string& key, const Value& found);
  std::map<std::string, Value> values_;
};

/// Free-form user keys from the experiment's `extra:` section, flattened to
/// dotted paths ("augment.flip": "true"). Components read what they know and
/// ignore the rest; the host does not validate them.
///
/// Example:
///   double scale = context.extra.get_number("my_net.init_scale", 1.0);
class Extra {
 public:
  Extra() = default;
  explicit Extra(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  std::string get_string(const std::string& key, const std::string& fallback) const;
  /// Throws trainyard::ConfigError naming `extra.KEY` when the text is not a number.
  double get_number(const std::string& key, double fallback) const;
  int64_t get_integer(const std::string& key, int64_t fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace trainyard
