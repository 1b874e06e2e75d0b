#pragma once
// What every command's adapter shares: Boost.Program_options descriptions of
// the common flags, parsing with one positional argument, and the launcher
// that starts worker processes for --nproc-per-node.
#include <cmath>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/program_options.hpp>

#include "config/experiment.h"
#include "plugins/registry.h"
#include "run/launch.h"
#include "trainyard/error.h"
#include "util/json.h"

namespace trainyard::host {

namespace po = boost::program_options;

po::options_description plugin_options();      ///< --plugin-dir
po::options_description experiment_options();  ///< --set
po::options_description help_option();         ///< --help, --version
po::options_description launch_options();      ///< --nproc-per-node and friends
/// What a command on an experiment accepts: its `own` options, the
/// launcher's when asked, then --set, --plugin-dir, --help and --version.
po::options_description experiment_command_options(const po::options_description& own, bool with_launcher = false);

template <class T>
std::string number_text(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isfinite(v) ? json_number(v) : std::to_string(v);
  else
    return std::to_string(v);
}

/// A numeric flag checked like its YAML twin: a value outside [lo, hi] (or,
/// for a double, not finite) is a ConfigError naming the flag, the range and
/// the value, raised while the command line is parsed.
template <class T>
po::typed_value<T>* ranged(const std::string& flag, T lo, T hi, T* store = nullptr) {
  return po::value<T>(store)->notifier([flag, lo, hi](const T& v) {
    bool finite = true;
    if constexpr (std::is_floating_point_v<T>) finite = std::isfinite(v);
    if (!finite || v < lo || v > hi)
      throw ConfigError(
          "command line: --" + flag + " " + number_text(v),
          "expected a value from " + number_text(lo) + " to " + number_text(hi) + ", got " + number_text(v), "");
  });
}

/// Parses argv[2..] with one positional argument named `positional` ("" for
/// none); returns false when --help or --version was answered. Throws
/// ConfigError for bad flags or a missing positional argument.
bool parse_command_line(int argc, char** argv, const std::string& usage, const po::options_description& visible,
                        const std::string& positional, po::variables_map& vm);

template <class T>
std::vector<T> many(const po::variables_map& vm, const char* key) {
  return vm.count(key) ? vm[key].as<std::vector<T>>() : std::vector<T>{};
}
template <class T>
std::optional<T> maybe(const po::variables_map& vm, const char* key) {
  return vm.count(key) ? std::optional<T>(vm[key].as<T>()) : std::nullopt;
}

/// The experiment of a command's EXP.yaml, --set and --plugin-dir.
Experiment load_experiment(const po::variables_map& vm, Registry& registry);

/// The launcher's flags (--nproc-per-node and friends) as a request for
/// run/launch.h's launch_if_asked, with the worker's command line: argv
/// without those flags.
LaunchRequest launch_request(const po::variables_map& vm, int argc, char** argv);

}  // namespace trainyard::host
