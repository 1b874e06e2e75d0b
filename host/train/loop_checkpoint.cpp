#include "train/loop_checkpoint.h"

#include "distributed/communicator.h"
#include "train/guard.h"

namespace trainyard::host {

CheckpointState checkpoint_state(const LoopProgress& p, const std::vector<Built<Meter>>& train_meters,
                                 Communicator* comm) {
  CheckpointState state;
  state.at = p.at;
  state.best = p.stopping.best;
  state.has_best = p.stopping.has_best;
  state.epochs_without_improvement = p.stopping.epochs_without_improvement;
  state.stage = p.stage.index;
  state.stage_first_iteration = p.stage.first_iteration;
  state.stage_first_epoch = p.stage.first_epoch;
  state.values = p.values;
  if (p.scaler.enabled) {
    state.loss_scale = p.scaler.scale;
    state.loss_scale_finite_in_a_row = p.scaler.finite_in_a_row;
    state.loss_scale_skipped = p.scaler.skipped;
  }
  for (const auto& m : train_meters) {
    auto local = guarded(*m.config, "accumulators", [&] { return m.object->accumulators(); });
    state.train_meters.push_back(comm ? comm->sum(local) : local);  // the sum over ranks
  }
  return state;
}

void restore_checkpoint_state(const CheckpointState& state, LoopProgress& p,
                              const std::vector<Built<Meter>>& train_meters, int rank) {
  p.stage.first_iteration = state.stage_first_iteration;
  // A stage starts where the one before it ended, which is earlier than the
  // sum of their epochs when that one stopped on a `stopping:` criterion.
  if (state.stage_first_epoch >= 0) p.stage.first_epoch = state.stage_first_epoch;
  p.at = state.at;
  p.stopping = {state.best, state.has_best, state.epochs_without_improvement};
  p.values = state.values;
  if (p.scaler.enabled && state.loss_scale > 0) {
    p.scaler.scale = state.loss_scale;
    p.scaler.finite_in_a_row = state.loss_scale_finite_in_a_row;
    p.scaler.skipped = state.loss_scale_skipped;
  }
  if (state.train_meters.size() != train_meters.size()) return;
  for (size_t i = 0; i < state.train_meters.size(); ++i) {
    // Saved as the sum over ranks: rank 0 carries it, the others restart from zero.
    auto acc = rank == 0 ? state.train_meters[i] : std::vector<double>(state.train_meters[i].size(), 0.0);
    guarded(*train_meters[i].config, "set_accumulators", [&] { train_meters[i].object->set_accumulators(acc); });
  }
}

}  // namespace trainyard::host
