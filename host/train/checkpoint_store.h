#pragma once
// A run's checkpoints/ folder: the one place that lists, verifies, peeks,
// loads, saves, prunes and keeps the best checkpoint. The file format itself
// is train/checkpoint.h's; the Runner and the EpochLoop both go through here.
#include <optional>
#include <string>
#include <vector>

#include "train/checkpoint.h"

namespace trainyard::host {

/// The loop position a checkpoint's file name gives (ckpt-e0002-i00001876.pt),
/// or nullopt for another name.
std::optional<LoopPosition> position_of_name(const std::string& path);

class CheckpointStore {
 public:
  /// `dir` is RUN_DIR/checkpoints; `keep` the newest checkpoints kept (0: all).
  CheckpointStore(std::string dir, int64_t keep);

  const std::string& dir() const { return dir_; }
  /// DIR/ckpt-e0002-i00001876.pt
  std::string path_of(const LoopPosition& at) const;
  /// Checkpoint files, oldest first (by iteration); best.pt is not among them.
  std::vector<std::string> list() const;
  /// Deletes leftovers of interrupted writes; returns their names.
  std::vector<std::string> remove_stale_temporaries() const;

  void verify(const std::string& path) const { verify_checkpoint(path); }
  CheckpointState peek(const std::string& path) const { return peek_checkpoint(path); }
  CheckpointState load(const std::string& path, Network& network, torch::optim::Optimizer& optimizer,
                       Verify verify = Verify::yes, const std::vector<CheckpointPart*>& parts = {}) const {
    return load_checkpoint(path, network, optimizer, verify, parts);
  }

  /// Saves the state at `state.at`, then prunes to `keep`. A failed write
  /// (a full disk, a size limit) throws trainyard::Error saying which older
  /// checkpoint is intact. Returns the path written.
  std::string save(Network& network, torch::optim::Optimizer& optimizer, const CheckpointState& state,
                   const std::vector<const CheckpointPart*>& parts = {}) const;
  /// Copies the checkpoint at `at` (and its manifest) to best.pt, which the
  /// rotation never deletes.
  void keep_as_best(const LoopPosition& at) const;

 private:
  std::string dir_;
  int64_t keep_;
};

}  // namespace trainyard::host
