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
/// A component declares its options one way: a TypedSchema (below) binds
/// each option to a field of the component's options struct, and bind()
/// fills the struct; no key is read by string.
///
/// Example:
///   struct SgdOptions {
///     double lr = 0, momentum = 0;
///     std::string vocabulary;
///   };
///   trainyard::TypedSchema<SgdOptions> schema;
///   schema.require("lr", &SgdOptions::lr, "learning rate").above(0.0);
///   schema.add("momentum", &SgdOptions::momentum, 0.9, "momentum").min(0.0).below(1.0);  // 0 <= momentum < 1
///   schema.add_path("vocabulary", &SgdOptions::vocabulary, "", "word list, relative to the experiment file");
///   ...
///   SgdOptions o = schema.bind(options);
///
/// Compatibility: Schema::add and Options::get<T>("key") read by string, as
/// plugins written against SDK 1.0 and 1.1 do; they keep working (same ABI)
/// but are marked [[deprecated]], so a plugin that calls them compiles with
/// a warning naming the replacement (docs/sdk-changes.md). A plugin that must
/// keep them for now compiles with -Wno-deprecated-declarations.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace trainyard {

/// `path` holds a string, like `string`; the host resolves a relative path
/// against the folder of the experiment file that gave it (an empty value
/// stays empty), so plugins receive absolute paths.
enum class OptionType { boolean, integer, number, string, integer_list, number_list, string_list, path };

/// "integer", "list of numbers", ...: how types are named in messages and docs.
const char* type_name(OptionType type);

/// One option value. The alternative held always matches the option's type.
using Value = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                           std::vector<std::string>>;

/// The type a Value holds (never `path`: a path's value is a string).
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
  bool min_exclusive = false;        ///< the value must be above min_value, not equal to it
  bool max_exclusive = false;        ///< the value must be below max_value, not equal to it
  std::vector<std::string> choices;  ///< strings, and each element of string lists

  /// Inclusive bounds: min(0) allows 0.
  OptionSpec& min(double v) {
    min_value = v;
    min_exclusive = false;
    return *this;
  }
  OptionSpec& max(double v) {
    max_value = v;
    max_exclusive = false;
    return *this;
  }
  OptionSpec& range(double lo, double hi) { return min(lo).max(hi); }
  /// Exclusive bounds: above(0) refuses 0; min(0).below(1) is 0 <= v < 1.
  OptionSpec& above(double v) {
    min_value = v;
    min_exclusive = true;
    return *this;
  }
  OptionSpec& below(double v) {
    max_value = v;
    max_exclusive = true;
    return *this;
  }
  /// Whether `v` lies within the bounds.
  bool in_range(double v) const;
  /// "between 0 and 1", "at least 0 and below 1", "above 0": the bounds, for messages.
  std::string range_text() const;
  OptionSpec& one_of(std::vector<std::string> c) {
    choices = std::move(c);
    return *this;
  }
  bool required() const { return !default_value.has_value(); }
};

/// The message of the 0.x option calls' deprecation.
#define TRAINYARD_DEPRECATED_SCHEMA_ADD                                                                    \
  [[deprecated(                                                                                            \
      "SDK 0.x option call: declare options with trainyard::TypedSchema<T>::add(key, &T::field, default, " \
      "description) (docs/sdk-changes.md)")]]
#define TRAINYARD_DEPRECATED_OPTIONS_GET                                                                   \
  [[deprecated(                                                                                            \
      "SDK 0.x option call: read options with trainyard::TypedSchema<T>::bind(options) into your options " \
      "struct (docs/sdk-changes.md)")]]

/// The options a component accepts, in declaration order.
class Schema {
 public:
  /// Deprecated (SDK 0.x; use TypedSchema<T>::add): an optional key; its type
  /// is the default's type. The int, int64_t, double, bool and const char*
  /// overloads keep a literal default from converting to another type (true
  /// must not become an integer).
  TRAINYARD_DEPRECATED_SCHEMA_ADD
  OptionSpec& add(const std::string& key, Value default_value, const std::string& description);
  TRAINYARD_DEPRECATED_SCHEMA_ADD
  OptionSpec& add(const std::string& key, const char* default_value, const std::string& description);
  TRAINYARD_DEPRECATED_SCHEMA_ADD
  OptionSpec& add(const std::string& key, int default_value, const std::string& description);
  TRAINYARD_DEPRECATED_SCHEMA_ADD
  OptionSpec& add(const std::string& key, int64_t default_value, const std::string& description);
  TRAINYARD_DEPRECATED_SCHEMA_ADD
  OptionSpec& add(const std::string& key, double default_value, const std::string& description);
  TRAINYARD_DEPRECATED_SCHEMA_ADD
  OptionSpec& add(const std::string& key, bool default_value, const std::string& description);
  /// A key the user must give.
  OptionSpec& require(const std::string& key, OptionType type, const std::string& description);
  /// An optional path, resolved by the host against the experiment file's folder.
  OptionSpec& add_path(const std::string& key, const std::string& default_value, const std::string& description);

  const std::vector<OptionSpec>& specs() const { return specs_; }
  const OptionSpec* find(const std::string& key) const;

 private:
  OptionSpec& push(OptionSpec spec);
  std::vector<OptionSpec> specs_;
};

/// Validated values for every key of a component's schema. A component
/// reads them through TypedSchema::bind(); get() is the compatibility path.
class Options {
 public:
  Options() = default;
  explicit Options(std::map<std::string, Value> values) : values_(std::move(values)) {}

  /// Deprecated (SDK 0.x; use TypedSchema<T>::bind): the value of a declared
  /// key. Throws trainyard::Error naming the key if it is absent or of
  /// another type (a bug in the component, not user input).
  template <class T>
  TRAINYARD_DEPRECATED_OPTIONS_GET const T& get(const std::string& key) const {
    return value<T>(key);
  }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  /// Throws trainyard::Error naming `key` when it is absent.
  void require_key(const std::string& key) const;
  const std::map<std::string, Value>& values() const { return values_; }

 private:
  template <class T>
  friend class TypedSchema;
  /// What get() returns; TypedSchema::bind() reads through it.
  template <class T>
  const T& value(const std::string& key) const {
    const Value& v = at(key);
    if (const T* p = std::get_if<T>(&v)) return *p;
    throw_type_mismatch(key, v);
  }
  const Value& at(const std::string& key) const;
  [[noreturn]] static void throw_type_mismatch(const std::string& key, const Value& found);
  std::map<std::string, Value> values_;
};

/// The OptionType a C++ field of an options struct is read as. Only these
/// seven field types exist: a field of any other type (float, int, ...)
/// fails to compile where it is bound.
template <class F>
struct OptionTypeOf;
template <>
struct OptionTypeOf<bool> {
  static constexpr OptionType value = OptionType::boolean;
};
template <>
struct OptionTypeOf<int64_t> {
  static constexpr OptionType value = OptionType::integer;
};
template <>
struct OptionTypeOf<double> {
  static constexpr OptionType value = OptionType::number;
};
template <>
struct OptionTypeOf<std::string> {
  static constexpr OptionType value = OptionType::string;
};
template <>
struct OptionTypeOf<std::vector<int64_t>> {
  static constexpr OptionType value = OptionType::integer_list;
};
template <>
struct OptionTypeOf<std::vector<double>> {
  static constexpr OptionType value = OptionType::number_list;
};
template <>
struct OptionTypeOf<std::vector<std::string>> {
  static constexpr OptionType value = OptionType::string_list;
};

/// A C++ type an option can be held in.
template <class F>
concept OptionField = requires {
  OptionTypeOf<F>::value;
};

/// A Schema whose options are fields of a struct T: each option is declared
/// once, with its field, and bind() fills a T from the validated Options. The
/// plain schema() is what the registrar and `trainyard describe` see.
///
/// Example:
///   struct MlpOptions {
///     std::vector<int64_t> hidden;
///     double dropout = 0;
///     std::string activation;
///   };
///   trainyard::TypedSchema<MlpOptions> schema;
///   schema.add("hidden_sizes", &MlpOptions::hidden, {256, 128}, "hidden layer widths").min(1);
///   schema.add("dropout", &MlpOptions::dropout, 0.0, "dropout probability").min(0.0).below(1.0);
///   schema.add("activation", &MlpOptions::activation, "relu", "activation").one_of({"relu", "gelu"});
///   r.add_network("mlp", "a multi-layer perceptron", schema.schema(),
///                 [schema](const trainyard::Options& o, const trainyard::Context& context) {
///                   MlpOptions options = schema.bind(o);  // no key read by string
///                   ...
///                 });
template <class T>
class TypedSchema {
 public:
  /// An optional option held by `field`; its type is the field's type.
  template <OptionField F>
  OptionSpec& add(const std::string& key, F T::*field, std::type_identity_t<F> default_value,
                  const std::string& description) {
    OptionSpec& spec = schema_.require(key, OptionTypeOf<F>::value, description);
    spec.default_value = Value(std::move(default_value));  // what Schema::add declares, without the 0.x call
    bind_field(key, field);
    return spec;
  }
  /// A key the user must give.
  template <OptionField F>
  OptionSpec& require(const std::string& key, F T::*field, const std::string& description) {
    OptionSpec& spec = schema_.require(key, OptionTypeOf<F>::value, description);
    bind_field(key, field);
    return spec;
  }
  /// A path option (resolved against the experiment file's folder).
  OptionSpec& add_path(const std::string& key, std::string T::*field, const std::string& default_value,
                       const std::string& description) {
    OptionSpec& spec = schema_.add_path(key, default_value, description);
    bind_field(key, field);
    return spec;
  }
  /// A required path option.
  OptionSpec& require_path(const std::string& key, std::string T::*field, const std::string& description) {
    OptionSpec& spec = schema_.require(key, OptionType::path, description);
    bind_field(key, field);
    return spec;
  }

  const Schema& schema() const { return schema_; }

  /// The struct with every bound field set from `options`, the rest left as
  /// T's own defaults. Throws trainyard::Error naming a key `options` lacks.
  T bind(const Options& options) const {
    T out{};
    for (const auto& field : fields_) field.read(options, out);
    return out;
  }
  /// The fields of `values` as Options again (what a resolved config shows).
  Options options_of(const T& values) const {
    std::map<std::string, Value> out;
    for (const auto& field : fields_) out[field.key] = field.write(values);
    return Options(std::move(out));
  }

 private:
  struct Field {
    std::string key;
    std::function<void(const Options&, T&)> read;
    std::function<Value(const T&)> write;
  };
  template <OptionField F>
  void bind_field(const std::string& key, F T::*field) {
    fields_.push_back({key,
                       [key, field](const Options& options, T& out) {
                         options.require_key(key);
                         out.*field = options.value<F>(key);
                       },
                       [field](const T& values) { return Value(values.*field); }});
  }
  Schema schema_;
  std::vector<Field> fields_;
};

/// Compatibility: free-form user keys from the experiment's `extra:` section,
/// flattened to dotted paths ("augment.flip": "true"), unvalidated. Plugins
/// written against SDK 1.0 and 1.1 may read them; new code declares its
/// options in its schema, where the host checks them.
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
