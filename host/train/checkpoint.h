#pragma once
// Checkpoint files: network, optimizer, loop position, RNG state and the train
// meters' accumulators, in one torch archive written atomically.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <torch/serialize/output-archive.h>
#include <nlohmann/json.hpp>

namespace torch::optim {
class Optimizer;
}
namespace torch::serialize {
class InputArchive;
}  // namespace torch::serialize

namespace trainyard {
class Network;
}

namespace trainyard::host {

struct LoopPosition {
  int64_t epoch = 0;      ///< epochs completed
  int64_t position = 0;   ///< train batches done in the current epoch
  int64_t iteration = 0;  ///< train iterations since the run began
};

struct CheckpointState {
  LoopPosition at;
  std::vector<std::vector<double>> train_meters;  ///< accumulators, in meter order
  double best = 0;                                ///< stopping: the best monitor value so far
  bool has_best = false;
  int64_t epochs_without_improvement = 0;
  int64_t stage = 0;                  ///< multi-stage runs: index of the stage being trained
  int64_t stage_first_iteration = 0;  ///< the iteration at which that stage began
  int64_t stage_first_epoch = -1;     ///< the epoch count at which it began; -1: not recorded
  /// The run's latest meter values (the last test's among them): a resumed
  /// run knows whether its stopping target was already reached.
  std::map<std::string, double> values;
  std::string config_hash;  ///< SHA-256 of the resolved config (in the manifest)
  /// The resolved config itself (in the manifest): what a resume compares
  /// against, key by key, rather than the run directory's editable config.yaml.
  nlohmann::ordered_json config;
  /// fp16-mixed's loss scaler (scale, finite updates in a row, skipped updates); scale 0: none saved.
  double loss_scale = 0;
  int64_t loss_scale_finite_in_a_row = 0, loss_scale_skipped = 0;
  /// load_checkpoint: the keys of the CheckpointParts the file held.
  std::vector<std::string> parts_found;
};

/// State kept beside the network's in every checkpoint, under its own key
/// (weight averaging's averaged weights): what a hook with state saves so
/// that a resumed run continues exactly.
class CheckpointPart {
 public:
  virtual ~CheckpointPart() = default;
  /// The archive key, e.g. "ema".
  virtual std::string checkpoint_key() const = 0;
  virtual void save_part(torch::serialize::OutputArchive& archive) const = 0;
  /// Throws trainyard::Error (without the file's name: the caller adds it)
  /// when the saved state does not fit.
  virtual void load_part(torch::serialize::InputArchive& archive) = 0;
};

/// Writes to a temporary file and renames it into place, then writes
/// PATH.manifest.json (size, SHA-256, config hash) the same way: a checkpoint
/// is complete only with its manifest.
/// `parts` are written under their keys.
void save_checkpoint(const std::string& path, Network& network, torch::optim::Optimizer& optimizer,
                     const CheckpointState& state, const std::vector<const CheckpointPart*>& parts = {});

/// A checkpoint's whole contents at one moment, on the host: the archive
/// save_checkpoint() would write, its tensors copied (a GPU's into pinned
/// memory), and what its manifest records. Another thread may write it while
/// the training goes on.
struct CheckpointSnapshot {
  torch::serialize::OutputArchive archive;
  CheckpointState state;  ///< position, config hash and config (manifest_state())
};
/// The part of `state` a manifest records.
CheckpointState manifest_state(const CheckpointState& state);
/// Copies every tensor a checkpoint holds (network, optimizer, parts; RNG
/// states and meters are values already): on a GPU into pinned host memory
/// without blocking, then one wait per device's stream; on the CPU a copy.
CheckpointSnapshot snapshot_checkpoint(Network& network, torch::optim::Optimizer& optimizer,
                                       const CheckpointState& state,
                                       const std::vector<const CheckpointPart*>& parts = {});
/// save_checkpoint()'s writing half: serialises, writes the temporary file,
/// syncs, renames, then the manifest the same way. Any thread.
void write_checkpoint(const std::string& path, CheckpointSnapshot& snapshot);

/// Whether load_checkpoint first checks the file against its manifest
/// (already_done: the caller just ran verify_checkpoint; hashing is not free).
enum class Verify { yes, already_done };

/// Restores network, optimizer and the global CPU RNG; returns the position.
/// Each of `parts` the checkpoint holds is loaded and its key listed in
/// CheckpointState::parts_found. Throws trainyard::Error naming the file on
/// any mismatch or damage.
CheckpointState load_checkpoint(const std::string& path, Network& network, torch::optim::Optimizer& optimizer,
                                Verify verify = Verify::yes, const std::vector<CheckpointPart*>& parts = {});

/// The loop position and stage of a checkpoint, without loading weights
/// and without verifying it against its manifest (load_checkpoint does).
/// Throws trainyard::Error naming the file when it cannot be read.
CheckpointState peek_checkpoint(const std::string& path);

/// PATH.manifest.json.
std::string manifest_path(const std::string& checkpoint);
/// What a checkpoint's manifest says about the run it belongs to.
struct ManifestRecord {
  std::string config_sha256;
  nlohmann::ordered_json config;  ///< null in manifests written before trainyard 1.0
};
/// Reads PATH.manifest.json. Throws trainyard::Error naming the manifest
/// when it is missing or unreadable.
ManifestRecord read_manifest(const std::string& checkpoint);

/// Throws trainyard::Error when the checkpoint has no manifest or its size or
/// SHA-256 differs from the manifest's (truncated, bit-flipped, half-written).
void verify_checkpoint(const std::string& path);

}  // namespace trainyard::host
