#pragma once
// A run's checkpoints/ folder: the one place that lists, verifies, peeks,
// loads, saves, prunes and keeps the best checkpoint. The file format itself
// is train/checkpoint.h's; the Runner and the EpochLoop both go through here.
//
// checkpoint.async: the training thread only snapshots (train/checkpoint.h:
// snapshot_checkpoint) and one writer thread writes: the same atomic steps
// in the same order, then the pruning and best.pt. One write at a time: a
// save waits for the write in flight before it snapshots. A failed write is
// thrown by the next save() or finish().
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "formats/metrics.h"
#include "train/checkpoint.h"

namespace trainyard::host {

/// The loop position a checkpoint's file name gives (ckpt-e0002-i00001876.pt),
/// or nullopt for another name.
std::optional<LoopPosition> position_of_name(const std::string& path);

class BackgroundWorker;
struct Experiment;

class CheckpointStore {
 public:
  /// `dir` is RUN_DIR/checkpoints; `keep` the newest checkpoints kept (0: all);
  /// `async`: writes on a thread of their own (checkpoint.async).
  CheckpointStore(std::string dir, int64_t keep, bool async = false);
  /// Waits for the write in flight; a failure nobody collected is logged.
  ~CheckpointStore();
  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  const std::string& dir() const { return dir_; }
  /// DIR/ckpt-e0002-i00001876.pt
  std::string path_of(const LoopPosition& at) const;
  /// Checkpoint files, oldest first (by iteration); best.pt is not among them.
  std::vector<std::string> list() const;
  /// Deletes leftovers of interrupted writes; returns their names.
  std::vector<std::string> remove_stale_temporaries() const;

  void verify(const std::string& path) const { verify_checkpoint(path); }
  /// What the checkpoint's manifest records (its configuration and hash);
  /// throws trainyard::Error when it has none or it is unreadable.
  ManifestRecord manifest(const std::string& path) const { return read_manifest(path); }
  /// Whether the checkpoint has a manifest, written only after the checkpoint was whole.
  bool has_manifest(const std::string& path) const;
  CheckpointState peek(const std::string& path) const { return peek_checkpoint(path); }
  CheckpointState load(const std::string& path, Network& network, torch::optim::Optimizer& optimizer,
                       Verify verify = Verify::yes, const std::vector<CheckpointPart*>& parts = {}) const {
    return load_checkpoint(path, network, optimizer, verify, parts);
  }

  /// Saves the state at `state.at`, then prunes to `keep`. A failed write
  /// (a full disk, a size limit) throws trainyard::Error saying which older
  /// checkpoint is intact. Returns the path written. Async: waits for the
  /// previous write (throwing its failure), snapshots the state and returns;
  /// the file is whole once the next save() or finish() returns.
  std::string save(Network& network, torch::optim::Optimizer& optimizer, const CheckpointState& state,
                   const std::vector<const CheckpointPart*>& parts = {});
  /// Copies the checkpoint at `at` (and its manifest) to best.pt, which the
  /// rotation never deletes; after the write in flight, on the writer.
  void keep_as_best(const LoopPosition& at);
  /// Waits for the write in flight and throws its failure (the end of a run).
  void finish();
  /// Waits for the write in flight; its failure, if any, stays for finish()
  /// (or is logged when the store goes).
  void finish_quietly();
  bool async() const { return writer_ != nullptr; }

  /// Per checkpoint, how long the training thread was held (the snapshot and
  /// any wait for the previous write; a synchronous save entirely) ...
  DurationStats blocked_stats() const;
  /// ... and how long writing it took (serialising, writing, syncing, hashing, renaming, pruning).
  DurationStats write_stats() const;

 private:
  /// Runs `write_file` (the checkpoint at `path`), then prunes; a failure
  /// thrown as save() documents.
  void write(const std::string& path, const std::function<void()>& write_file);
  void record(DurationStats& stats, double seconds);

  std::string dir_;
  int64_t keep_;
  mutable std::mutex stats_mutex_;
  DurationStats blocked_, written_;
  std::string written_line_;  ///< the last background write's log line, not yet logged (under stats_mutex_)
  void log_written();         ///< on the training thread: logs written_line_, if any
  std::unique_ptr<BackgroundWorker> writer_;  ///< async only; last: destroyed (joined) first
};

/// The store of `dir` (RUN_DIR/checkpoints) as a stage's sections ask:
/// checkpoint.keep, checkpoint.async.
std::shared_ptr<CheckpointStore> make_checkpoint_store(const std::string& dir, const Experiment& stage);

}  // namespace trainyard::host
