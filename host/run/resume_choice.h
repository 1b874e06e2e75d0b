#pragma once
// Which checkpoint a training run resumes from, and whether it may: the
// newest one that verifies and loads (an older one when it is damaged;
// checkpoints without a manifest only when asked), refused when it belongs
// to another configuration, or when the experiment or the plugins changed
// since the run started, unless the request allows it. Checkpoints are read
// through the run's checkpoint store only.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/experiment.h"
#include "run/runner.h"

namespace trainyard::host {

class CheckpointStore;
class EpochLoop;
struct ConfigChange;

/// Where a run starts: a stage's loop with a checkpoint's state loaded, or nothing.
struct ResumePoint {
  std::unique_ptr<EpochLoop> loop;  ///< null: nothing to resume; stage 0 starts afresh
  size_t stage = 0;
  std::string checkpoint;  ///< the checkpoint loaded; "" for a fresh start
  /// The checkpoint records no configuration (written before 1.0, or read
  /// without a manifest): check_changes() compares the run's config.yaml.
  bool config_unrecorded = false;
};

class ResumeChoice {
 public:
  /// Builds stage k's loop, as the run builds it.
  using MakeLoop = std::function<std::unique_ptr<EpochLoop>(size_t stage)>;
  /// All must outlive the choice; `experiment` is the whole experiment.
  ResumeChoice(const Experiment& experiment, const RunRequest& request, const Context& context, CheckpointStore& store,
               std::string run_dir, MakeLoop make_loop);

  /// The newest checkpoint of the run that verifies and loads, loaded into a
  /// loop of its stage. Throws ConfigError for a checkpoint of another
  /// configuration (never skipped), for checkpoints none of which loads, and
  /// for progress that only unverified checkpoints hold (unless
  /// --accept-unverified-checkpoints). Removes leftovers of interrupted
  /// writes first (rank 0).
  ResumePoint choose();

  /// After the ranks agreed on `point`: refuses (ConfigError) an experiment
  /// changed since the run's config.yaml (checkpoints that record no
  /// configuration) and plugin libraries changed since the run started,
  /// unless the request allows it. Nothing for a fresh start.
  void check_changes(const ResumePoint& point) const;

 private:
  /// `checkpoint`'s stage with its state loaded (hashed already), after
  /// belongs_to_run(). Throws Error when it does not load.
  ResumePoint load_from(const std::string& checkpoint);
  ResumePoint load_unverified(const std::vector<std::string>& newest_first);
  /// Refuses (ConfigError) a checkpoint whose manifest records another
  /// configuration than stage `stage`, naming both hashes and the first
  /// differing keys, unless only allowed keys changed or
  /// --allow-config-change was given. False when the manifest records no
  /// configuration (or there is none).
  bool belongs_to_run(const std::string& checkpoint, size_t stage) const;
  /// Whether an unverified checkpoint was evidently complete: its manifest
  /// exists (damaged), or metrics.jsonl shows training went on after it.
  bool evidently_complete(const std::string& checkpoint) const;
  /// Prints the changes (rank 0); true when one is not allowed on resume and
  /// --allow-config-change was not given.
  bool refused_changes(const std::vector<ConfigChange>& changes, const std::string& since) const;
  void check_config_changes() const;
  void check_plugin_changes() const;

  const Experiment& e_;
  const RunRequest& request_;
  const Context& context_;
  CheckpointStore& store_;
  std::string run_dir_;
  MakeLoop make_loop_;
};

}  // namespace trainyard::host
