#include "sweep/space.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "trainyard/error.h"

namespace trainyard::host {
namespace {

bool number(const std::string& text, double& out) {
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return !text.empty() && end && *end == '\0' && std::isfinite(out);
}

std::string four_digits(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

}  // namespace

SpaceAxis parse_space(const std::string& argument) {
  const std::string usage =
      "expected KEY=loguniform(LOW,HIGH), uniform(LOW,HIGH), int(LOW,HIGH) or choice(V1,V2,...), e.g. "
      "--space 'optimizer.lr=loguniform(1e-4,1e-1)'";
  const auto eq = argument.find('=');
  const auto open = argument.find('(', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || eq == 0 || open == std::string::npos || argument.back() != ')')
    throw ConfigError("command line: --space " + argument + ": not a search space", usage, "");
  SpaceAxis axis;
  axis.key = argument.substr(0, eq);
  const std::string kind = argument.substr(eq + 1, open - eq - 1);
  const std::vector<std::string> args = split_values(argument.substr(open + 1, argument.size() - open - 2));
  if (kind == "choice") {
    axis.kind = SpaceAxis::Kind::choice;
    axis.choices = args;
    for (const auto& v : args)
      if (v.empty()) throw ConfigError("command line: --space " + argument + ": an empty choice", usage, "");
    return axis;
  }
  if (kind == "uniform")
    axis.kind = SpaceAxis::Kind::uniform;
  else if (kind == "loguniform")
    axis.kind = SpaceAxis::Kind::loguniform;
  else if (kind == "int")
    axis.kind = SpaceAxis::Kind::integer;
  else
    throw ConfigError("command line: --space " + argument + ": unknown distribution '" + kind + "'",
                      "expected loguniform, uniform, int or choice", "");
  if (args.size() != 2 || !number(args[0], axis.low) || !number(args[1], axis.high) || !(axis.low < axis.high))
    throw ConfigError("command line: --space " + argument + ": expected two numbers LOW < HIGH", usage, "");
  if (axis.kind == SpaceAxis::Kind::loguniform && axis.low <= 0)
    throw ConfigError("command line: --space " + argument + ": loguniform needs LOW > 0",
                      "expected 0 < LOW < HIGH, e.g. loguniform(1e-4,1e-1)", "");
  if (axis.kind == SpaceAxis::Kind::integer && (axis.low != std::floor(axis.low) || axis.high != std::floor(axis.high)))
    throw ConfigError("command line: --space " + argument + ": int needs whole bounds", "expected e.g. int(16,256)",
                      "");
  // Integers are drawn in a double: beyond 2^53 not every one exists, and
  // the conversion to int64 overflows past 2^63.
  constexpr double kLargestWhole = 9007199254740992.0;  // 2^53
  if (axis.kind == SpaceAxis::Kind::integer &&
      (std::fabs(axis.low) > kLargestWhole || std::fabs(axis.high) > kLargestWhole))
    throw ConfigError("command line: --space " + argument + ": a bound beyond 2^53",
                      "expected whole bounds from -9007199254740992 to 9007199254740992", "");
  if (!std::isfinite(axis.high - axis.low))
    throw ConfigError("command line: --space " + argument + ": the range HIGH - LOW is not a finite number",
                      "expected bounds whose difference is finite", "");
  // Drawn values are written with 4 significant digits (the value the trial
  // runs with and its run's name): a range narrower than that would give
  // every trial the same value, outside the range as often as not.
  if ((axis.kind == SpaceAxis::Kind::uniform || axis.kind == SpaceAxis::Kind::loguniform) &&
      four_digits(axis.low) == four_digits(axis.high))
    throw ConfigError(
        "command line: --space " + argument + ": LOW and HIGH are the same number to 4 significant digits (" +
            four_digits(axis.low) + "), the precision trials are written with",
        "expected bounds that differ in their first 4 significant digits", "set the key itself with --set");
  return axis;
}

std::vector<SweepPoint> sample_space(const std::string& experiment_name, const std::vector<SpaceAxis>& axes,
                                     int64_t trials, uint64_t seed) {
  std::mt19937_64 draw(seed);
  // The C++ distributions' algorithms are the library's own: draw from raw
  // 64-bit words so that every platform samples the same trials.
  auto unit = [&] { return static_cast<double>(draw() >> 11) * 0x1.0p-53; };  // [0, 1)
  std::vector<SweepPoint> points;
  const int width = static_cast<int>(std::to_string(std::max<int64_t>(trials - 1, 0)).size());
  for (int64_t t = 0; t < trials; ++t) {
    std::vector<std::pair<std::string, std::string>> values;
    for (const auto& a : axes) {
      const double u = unit();
      std::string v;
      switch (a.kind) {
        case SpaceAxis::Kind::uniform:
          v = four_digits(a.low + u * (a.high - a.low));
          break;
        case SpaceAxis::Kind::loguniform:
          v = four_digits(std::exp(std::log(a.low) + u * (std::log(a.high) - std::log(a.low))));
          break;
        case SpaceAxis::Kind::integer:
          v = std::to_string(static_cast<int64_t>(a.low) + static_cast<int64_t>(u * (a.high - a.low + 1)));
          break;
        case SpaceAxis::Kind::choice:
          v = a.choices[static_cast<size_t>(u * static_cast<double>(a.choices.size()))];
          break;
      }
      values.emplace_back(a.key, v);
    }
    std::string index = std::to_string(t);
    if (index.size() < static_cast<size_t>(width)) index.insert(0, static_cast<size_t>(width) - index.size(), '0');
    points.push_back({point_name(experiment_name + "--t" + index, values), values});
  }
  return points;
}

}  // namespace trainyard::host
