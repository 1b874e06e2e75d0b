#pragma once
// The loop's own state in a checkpoint and back: where it is (position,
// stage), the stopping rule's progress, the latest values, fp16's loss scale
// and the train meters' accumulators. The hooks' state goes in as
// CheckpointParts (HostHook::checkpoint_part); the archive format is
// train/checkpoint.h's.
#include <cstdint>
#include <string>
#include <vector>

#include "train/checkpoint.h"
#include "train/components.h"
#include "train/precision.h"
#include "train/stopping.h"

namespace trainyard::host {

class Communicator;

/// Where a stage of a multi-stage run sits in it.
struct StageInfo {
  int64_t index = 0, count = 1;
  std::string name;
  int64_t first_epoch = 0;      ///< epochs of all earlier stages
  int64_t first_iteration = 0;  ///< the iteration at which this stage began
};

/// What the loop has done, as a checkpoint keeps it.
struct LoopProgress {
  LoopPosition at;
  StageInfo stage;
  StoppingProgress stopping;
  MeterValues values;
  LossScaler scaler;
};

/// The checkpoint state of `progress`, with the train meters' accumulators
/// summed over ranks (every rank calls it: a collective with `comm`).
CheckpointState checkpoint_state(const LoopProgress& progress, const std::vector<Built<Meter>>& train_meters,
                                 Communicator* comm);
/// Puts a checkpoint's state back into `progress` (the stage's index is the
/// caller's to check) and the train meters' accumulators (rank 0 carries the
/// saved sum, the others restart from zero).
void restore_checkpoint_state(const CheckpointState& state, LoopProgress& progress,
                              const std::vector<Built<Meter>>& train_meters, int rank);

}  // namespace trainyard::host
