// The EpochLoop's state in and out (the class is in train/epoch_loop.h; its
// stages are in epoch_loop.cpp): resuming from a checkpoint, continuing
// from the previous stage, and the checkpoint stage that saves it.
#include "train/epoch_loop.h"

#include "distributed/communicator.h"

namespace trainyard::host {

void EpochLoop::resume(const std::string& checkpoint, Verify verify) {
  CheckpointState state =
      store_->load(checkpoint, *c_.network.object, *c_.optimizer, verify, hooks_.checkpoint_parts());
  if (state.stage != stage_info_.index)
    throw Error(checkpoint + ": checkpoint of stage " + std::to_string(state.stage + 1) + ", not of stage " +
                std::to_string(stage_info_.index + 1));
  LoopProgress p = progress();
  restore_checkpoint_state(state, p, c_.train_meters, context_.rank);
  at_ = p.at, stage_info_ = p.stage, stopping_.progress() = p.stopping, values_ = p.values,
  updater_.scaler() = p.scaler;
  // A stage that had reached its target at this checkpoint's epoch stays
  // stopped, as the uninterrupted run did (a multi-stage run goes on with the
  // next stage from these weights).
  if (at_.position == 0 && at_.epoch > stage_info_.first_epoch)
    if (auto reached = stopping_.target_reached(values_); reached && !reached->empty())
      stop(*reached + " (at the checkpoint)", StopKind::criterion);
  // Events logged after this checkpoint happened in a future that is being replayed.
  log_.forget_after(at_.iteration);
  hooks_.each([&](HostHook& h) { h.after_resume(*this, state, checkpoint); });
}

void EpochLoop::continue_from(EpochLoop& previous) {
  at_ = previous.at_;
  stage_info_.first_iteration = at_.iteration;
  // This stage trains its own loop.epochs from here, also when the previous
  // stage ended early on its stopping criterion.
  stage_info_.first_epoch = at_.epoch;
  values_ = previous.values_;
  readings_ = previous.readings_;
  // fp16 stages share one loss scale
  if (updater_.scaler().enabled && previous.updater_.scaler().enabled) updater_.scaler() = previous.updater_.scaler();
  if (stopping_.watches_like(previous.stopping_)) {
    stopping_.progress().best = previous.stopping_.progress().best;
    stopping_.progress().has_best = previous.stopping_.progress().has_best;
  }
  hooks_.each(
      [&](HostHook& h) { h.continue_stage(*this, previous); });  // before the weights: ema reads the earlier ones
  copy_weights(previous.network(), *c_.network.object);
}

void EpochLoop::default_checkpoint() {
  hooks_.each([&](HostHook& h) { h.before_checkpoint(*this); });  // first, the update's checks read
  CheckpointState state = checkpoint_state(progress(), c_.train_meters, comm_);
  state.config_hash = config_hash_;
  state.config = config_resolved_;
  const std::vector<CheckpointPart*> hook_parts = hooks_.checkpoint_parts();
  const std::vector<const CheckpointPart*> parts(hook_parts.begin(), hook_parts.end());
  // The ranks hold the same weights: rank 0 writes them.
  on_rank0(comm_, context_.rank, "checkpoint write", loop_.stall_timeout_secs,
           [&] { store_->save(*c_.network.object, *c_.optimizer, state, parts); });
  hooks_.each([&](HostHook& h) { h.after_checkpoint(*this, store_->path_of(at_)); });
}

}  // namespace trainyard::host
