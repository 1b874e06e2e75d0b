#pragma once
// The run directory's result files, one codec each: metrics.jsonl (one event
// per line) and summary.json. The run log writes them; the report, sweep,
// eval and a resumed run read them back through the same functions.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace trainyard::host {

/// Named values of one event (a NaN is written as null and read back as NaN).
using NamedValues = std::map<std::string, double>;

/// One line of metrics.jsonl.
struct MetricsEvent {
  std::string phase;      ///< train | test | a callback's own
  int64_t epoch = 0;      ///< counted from 1; a test after an epoch's last iteration carries that epoch
  int64_t iteration = 0;  ///< train iterations since the run began
  std::string stage;      ///< multi-stage runs only
  double time = 0;        ///< seconds since the epoch (1970)
  NamedValues values;
};

/// One line, without the newline: {"phase": "train", "epoch": 1, ...}.
std::string encode_event(const MetricsEvent& event);
/// nullopt for a line that is not an event (a write cut short by a crash).
std::optional<MetricsEvent> decode_event(const std::string& line);
/// Every readable event of a metrics.jsonl (none when it does not exist).
std::vector<MetricsEvent> read_events(const std::string& path);

/// How many durations, their mean and their longest, in seconds.
struct DurationStats {
  int64_t count = 0;
  double mean = 0, max = 0;
  void add(double seconds);
};

/// summary.json: where a run ended and its last values.
struct RunSummary {
  std::string experiment;
  int64_t epochs_completed = 0;
  int64_t iteration = 0;
  std::string stage;    ///< multi-stage runs: the last stage trained
  NamedValues metrics;  ///< the last value of everything logged
  double samples_per_sec = 0, secs_per_train = 0, wall_s = 0;
  std::string stopped;                                 ///< why the run stopped early ("" when it ran out of epochs)
  std::optional<std::pair<std::string, double>> best;  ///< stopping.monitor and its best value
  /// This process's checkpoints: how long each held the training thread
  /// (checkpoint_blocked_s) and took to write (checkpoint_write_s).
  DurationStats checkpoint_blocked_s, checkpoint_write_s;

  /// Stopped by its own stopping criterion (target or early stop), not from outside.
  bool stopped_by_criterion() const;
};

/// Pretty-printed JSON, ending in a newline.
std::string encode_summary(const RunSummary& summary);
/// nullopt when the file is missing or not a summary.
std::optional<RunSummary> read_summary(const std::string& path);

/// {"a": 1.5, "b": null}: values as JSON text (eval --output, summaries).
std::string encode_values(const NamedValues& values);

}  // namespace trainyard::host
