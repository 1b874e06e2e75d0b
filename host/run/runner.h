#pragma once
// One run of an experiment, start to end: the Runner picks and verifies the
// checkpoint to resume, refuses a changed config unless allowed, keeps the
// run directory (config snapshot, provenance, report), installs the stop
// signals, and sequences the stages, one EpochLoop each; it owns the stall watchdog and hands the loop the stop signals. Commands only build a
// RunRequest and map the outcome to an exit code.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config_diff.h"
#include "config/experiment.h"
#include "plugins/registry.h"
#include "trainyard/context.h"
#include "trainyard/loop.h"

namespace trainyard::host {

class CheckpointStore;
class HostHook;
class EpochLoop;
struct Session;

struct RunRequest {
  std::string output_dir;            ///< folder of run directories; "" for output.dir
  bool fresh = false;                ///< start over; the old run directory is kept, renamed
  bool allow_config_change = false;  ///< resume although settings other than the loop's length changed
  /// Resume from checkpoints whose manifests are missing or unreadable, once
  /// one of them loads (otherwise such checkpoints are refused, never dropped).
  bool accept_unverified = false;
  /// Resume although a plugin library the run uses changed content since the
  /// run started (its SHA-256 in provenance.json differs).
  bool allow_plugin_change = false;
  bool debug = false;  ///< stop at the first non-finite value, naming where it came from
  /// --until-epoch N: stop (resumably, with a checkpoint) once N epochs are
  /// done, the schedule still that of loop.epochs; 0: train them all.
  int64_t until_epoch = 0;
  /// --profile A:B: a Kineto trace of train iterations A+1..B of this process
  /// in RUN_DIR/profile/ (train/profiler.h); "" for none.
  std::string profile;
  std::vector<std::string> command_line;  ///< for provenance.json
};

/// Throws ConfigError naming --profile when `window` is not A:B (0 <= A < B)
/// or B: checked before any process is launched.
void check_profile_window(const std::string& window);

struct RunOutcome {
  std::string run_dir;
  int64_t epochs_done = 0, total_epochs = 0;
  MeterValues values;              ///< the last values of the last stage
  int64_t iteration = 0;           ///< where the run stands
  bool stopped_by_signal = false;  ///< resumable: the same command continues it
  std::string report;              ///< report.html, when written
};

class Runner {
 public:
  /// `experiment` and `registry` must outlive the Runner. Joins the process
  /// group in a data-parallel run.
  Runner(const Experiment& experiment, const Registry& registry, RunRequest request);
  ~Runner();

  /// Trains every stage from where the run stands. Throws ConfigError for a
  /// run that must not go on (a foreign checkpoint, a refused config change).
  RunOutcome run();

  const std::string& run_dir() const { return run_dir_; }
  const Context& context() const;

 private:
  const Experiment& stage_experiment(size_t k) const { return e_.stages.empty() ? e_ : e_.stages[k]; }
  size_t stage_count() const { return std::max<size_t>(1, e_.stages.size()); }
  std::unique_ptr<EpochLoop> make_loop(size_t stage);
  /// The newest checkpoint that verifies and loads, as a trainer of its
  /// stage; null when there is none (a fresh start).
  std::unique_ptr<EpochLoop> resume();
  /// Builds and checks every stage after `from_stage` (ConfigError naming
  /// the stage), before anything is written.
  void check_later_stages(size_t from_stage, EpochLoop& trainer);
  /// Refuses (ConfigError) a checkpoint whose manifest records another
  /// configuration than stage `stage` of this experiment, naming both hashes
  /// and the first differing keys, unless only allowed keys changed or
  /// --allow-config-change was given. Returns false when the manifest records
  /// no configuration (written before 1.0, or unreadable): then config.yaml
  /// is compared.
  bool check_checkpoint_belongs(const std::string& checkpoint, size_t stage) const;
  /// The run directory's config.yaml against the experiment (checkpoints
  /// that record no configuration).
  void check_config_changes() const;
  void check_plugin_changes() const;
  /// Whether an unverified checkpoint was evidently complete: its manifest
  /// exists (damaged), or metrics.jsonl shows training went on after it.
  bool evidently_complete(const std::string& checkpoint) const;
  std::unique_ptr<EpochLoop> resume_unverified(const std::vector<std::string>& checkpoints);
  /// The trainer of `checkpoint`'s stage with its state loaded (not hashed
  /// again), after check_checkpoint_belongs. Throws Error when it does not load.
  std::unique_ptr<EpochLoop> load_from(const std::string& checkpoint);
  /// Prints the changes (rank 0); true when one is not allowed on resume and
  /// --allow-config-change was not given.
  bool refused_changes(const std::vector<ConfigChange>& changes, const std::string& since) const;
  /// `network`: the network's facts for provenance.json (plugin, parameters, cost per sample).
  void write_run_directory(const nlohmann::ordered_json& network);
  /// Everything after the run directory is written: the stages' training.
  RunOutcome train(std::unique_ptr<EpochLoop>& trainer);
  /// Bad input stopped the run before its first checkpoint: removes the run
  /// directory if this run made it (and puts --fresh's previous one back).
  void undo_new_run_directory();
  void announce_stage(EpochLoop& trainer) const;

  const Experiment& e_;
  const Registry& registry_;
  RunRequest request_;
  std::string run_dir_;
  std::shared_ptr<CheckpointStore> store_;  ///< the run's checkpoints, shared with its trainers
  /// --profile's hook, one for every stage; made (and its window checked) before the session starts.
  std::shared_ptr<HostHook> profiler_;
  std::shared_ptr<HostHook> until_epoch_;  ///< --until-epoch's hook, one for every stage
  std::unique_ptr<Session> session_;       ///< this rank's place in the run
  std::string resumed_from_;
  bool compare_saved_config_ = false;  ///< the resumed checkpoint records no configuration
  size_t stage_ = 0;
  bool made_run_dir_ = false;  ///< this run created the run directory (rank 0)
  std::string kept_previous_;  ///< where --fresh moved the previous run directory
};

}  // namespace trainyard::host
