#pragma once
// `trainyard sweep --space KEY=DIST(...) --trials N --seed S`: random search.
// Each trial draws every key from its distribution with one generator seeded
// by S, so the same command draws the same trials (and a rerun finds their
// run directories).
#include <cstdint>
#include <string>
#include <vector>

#include "sweep/sweep.h"

namespace trainyard::host {

struct SpaceAxis {
  enum class Kind { uniform, loguniform, integer, choice };
  std::string key;  ///< dotted key, as for --set
  Kind kind = Kind::uniform;
  double low = 0, high = 0;          ///< uniform, loguniform, int (inclusive)
  std::vector<std::string> choices;  ///< choice: YAML values as written
};

/// "optimizer.lr=loguniform(1e-4,1e-1)", "uniform(0.8,0.99)", "int(16,256)",
/// "choice(sgd,adam)" (commas inside brackets or braces do not split, as in
/// --grid). Throws ConfigError naming --space.
SpaceAxis parse_space(const std::string& argument);

/// `trials` points, trial k named EXPERIMENT--tKK--key=value...; numbers
/// drawn are written with 4 significant digits, and that is the value the
/// trial runs with.
std::vector<SweepPoint> sample_space(const std::string& experiment_name, const std::vector<SpaceAxis>& axes,
                                     int64_t trials, uint64_t seed);

}  // namespace trainyard::host
