#pragma once
// `trainyard sweep`: the cartesian product of --grid values (or trials drawn
// from --space, sweep/space.h), each point a separate `trainyard run` (its
// own run directory, resumable), and a ranked table of the results
// (sweep.csv, sweep.md). Playground's "large amount of
// experiments from parameterized launch commands".
#include <map>
#include <string>
#include <vector>

namespace trainyard::host {

struct GridAxis {
  std::string key;                  ///< dotted key, as for --set
  std::vector<std::string> values;  ///< YAML values as written
};

/// "a, [b, c], {d: e}" -> "a", "[b, c]", "{d: e}": split at commas outside
/// brackets and braces, blanks trimmed (the values of --grid and of --space's choice).
std::vector<std::string> split_values(const std::string& text);

/// "optimizer.lr=0.1,0.01" or "network.hidden_sizes=[64],[128, 64]" (commas
/// inside brackets or braces do not split). Throws ConfigError.
GridAxis parse_grid(const std::string& argument);

struct SweepPoint {
  std::string name;  ///< run directory name: EXPERIMENT--key=value--key=value
  std::vector<std::pair<std::string, std::string>> values;
  std::vector<std::string> sets() const;  ///< "key=value" for --set
};

/// Every combination, the last axis varying fastest.
std::vector<SweepPoint> expand_grid(const std::string& experiment_name, const std::vector<GridAxis>& axes);

/// A run directory name from values: characters other than [A-Za-z0-9._=+-]
/// become '_'.
std::string point_name(const std::string& experiment_name,
                       const std::vector<std::pair<std::string, std::string>>& values);

struct SweepResult {
  SweepPoint point;
  std::string status;  ///< finished | skipped (finished before) | stopped at N epochs (halving) | failed
  int exit_code = 0;
  std::string error;                      ///< the failed run's last error line
  std::map<std::string, double> metrics;  ///< from its summary.json
  int64_t epochs = 0;                     ///< epochs its run directory holds
  double wall_s = 0;                      ///< this sweep's processes for it, together
  int64_t rank = 0;                       ///< 1 for the best; 0 without a ranking metric or a finite value
  std::string note;                       ///< why a run with the value is not ranked ("test_loss is nan")
};

/// How runs are ranked: by `metric` ("" none), best first (greater when
/// `maximize`); a run that trained more epochs ranks before one stopped
/// earlier (successive halving: its value is from a later epoch).
struct Ranking {
  std::string metric;
  bool maximize = true;
};
/// Sets each result's rank and returns them best first (unranked last, in
/// their order). A NaN or infinite value is not ranked: its row stays, with
/// `note` saying so, and the value itself is written in the table.
std::vector<SweepResult> ranked(std::vector<SweepResult> results, const Ranking& ranking);

/// A result's value as the table and the progress lines write it: JSON's
/// digits, and nan, inf or -inf as such (JSON's null would read as missing).
std::string table_number(double value);

/// The metrics and whether the run is complete, from RUN_DIR/summary.json.
/// `total_epochs` is what a complete run trains (all stages).
bool read_summary(const std::string& run_dir, int64_t total_epochs, std::map<std::string, double>& metrics,
                  double& wall_s);

/// One row per result, in their order; `keys`: the varied keys (grid axes or space keys).
std::string sweep_csv(const std::vector<std::string>& keys, const std::vector<SweepResult>& results);
std::string sweep_markdown(const std::vector<std::string>& keys, const std::vector<SweepResult>& results);

}  // namespace trainyard::host
