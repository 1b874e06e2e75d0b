#pragma once
// The loop's events and who hears them, in one order: the users' callbacks
// and the host's own duties (test results on disk, the best checkpoint, the
// periodic train log, test and checkpoint, throughput, weight averaging, the
// summary, the profiler) are hooks alike, ordered by priority. A new duty
// lands as a hook: the loop (train/epoch_loop.h) does not change.
//
// Hooks see the loop through LoopState, declared here and implemented by the
// EpochLoop: a hook's file includes this header, never the loop's.
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/loader.h"
#include "formats/run_paths.h"
#include "train/checkpoint.h"
#include "train/components.h"
#include "train/update.h"
#include "trainyard/callback.h"

namespace trainyard::host {

class CheckpointStore;
class Communicator;
class Hooks;

/// Named priorities on the scale of a callback's `priority:` (lower runs
/// first, ties in the order added; users' callbacks default to normal, 0).
/// MMEngine's nine levels (priority.py), centred on 0.
namespace priority {
inline constexpr int64_t highest = -50, very_high = -40, high = -20, above_normal = -10, normal = 0, below_normal = 10,
                         low = 20, very_low = 40, lowest = 50;
/// "high", "normal (0)", "15": how a priority is named in `hooks()` listings.
std::string name(int64_t value);
}  // namespace priority

/// What a hook sees of the loop and may ask of it: the SDK's Loop (what
/// callbacks see) and the host's own state. Implemented by the EpochLoop.
class LoopState : public Loop {
 public:
  virtual LoopPosition position_state() const = 0;
  /// The built components and the configs they came from.
  virtual const Components& components() const = 0;
  virtual const RunPaths& paths() const = 0;
  /// Null in a single-process run.
  virtual Communicator* communicator() const = 0;
  virtual CheckpointStore& checkpoints() = 0;
  /// Rank 0 writes the run's files; the other ranks write nothing.
  bool writes_files() const { return context().rank == 0; }
  /// The other hooks of this loop (find<T>() reaches a hook of a known type).
  virtual Hooks& hooks() = 0;

  /// The train meters' values over all ranks, named train_*.
  virtual MeterValues train_meter_values() = 0;
  /// Adds what the last update says to a train log line: lr, grad_norm, and
  /// loss_scale, scaler_skipped_updates and skipped_updates where kept.
  virtual void add_update_values(MeterValues& v) const = 0;
  /// Makes `values` the latest of values() (and meter_readings(), at this epoch and iteration).
  virtual void take_values(const MeterValues& values) = 0;
  /// A test ran at this iteration: the epoch's end does not test the same state again.
  virtual void mark_tested() = 0;
  /// The test meters over the test set on the current weights, without
  /// logging or the after_test hooks (after_test_batch is called).
  virtual MeterValues test_pass() = 0;

  /// An accumulation (loop.iter_size) is under way: no checkpoint now.
  virtual bool update_pending() const = 0;
  /// The update: its settings and the checks it keeps on the device.
  virtual Updater& updater() = 0;
  /// An update's outcome (Updater::finish, Updater::read_checks) into the
  /// loop's values, the after_update_checks hooks told; a stop checkpoints
  /// the last good state and throws NonFiniteStop.
  virtual void take_update_outcome(const UpdateOutcome& outcome) = 0;
  /// Checkpoint before the next batch (all ranks agree: any rank's request counts).
  virtual void request_checkpoint() = 0;
  /// The checkpoint being written is the one at an epoch's end (after its
  /// after_epoch hooks), not a periodic or stop-request one.
  virtual bool epoch_end_checkpoint() const = 0;
  /// The epoch that just ended improved the stopping rule's monitored value.
  virtual bool epoch_improved() const = 0;
  /// The stopping rule's best monitored value so far.
  virtual std::optional<double> best_value() const = 0;
  /// Why the run stops ("" while it does not).
  virtual const std::string& stop_reason() const = 0;
  /// Where this stage of a multi-stage run sits ("" name for a single stage).
  virtual const std::string& stage_name() const = 0;
  /// The training split's skipped-record counts of the current epoch.
  virtual const LoaderStats& train_loader_stats() const = 0;
};

/// A listener to the loop. The SDK's Callback events, plus the host's own:
/// after_update (after each optimizer step, not each batch: iter_size
/// batches make one update), the fetch of each batch, the epoch's train and
/// test lines, and the checkpoint's contents.
class HostHook {
 public:
  virtual ~HostHook() = default;
  /// "keep best checkpoint", "callback 'console' (libconsole.so)": for listings and errors.
  virtual std::string name() const = 0;
  virtual void before_run(LoopState&) {}
  virtual void after_run(LoopState&) {}
  virtual void before_epoch(LoopState&) {}
  /// Before the epoch's checkpoint, so that no call is lost to a failure;
  /// what needs that checkpoint on disk listens to after_checkpoint and asks
  /// LoopState::epoch_end_checkpoint().
  virtual void after_epoch(LoopState&) {}
  virtual void before_train_iter(LoopState&, const Batch&) {}
  virtual void after_train_iter(LoopState&, const StepResult&) {}
  virtual void after_update(LoopState&, const UpdateOutcome&) {}
  /// The update checks kept on the device (loop.update_checks_every) were
  /// read: the outcome says how many of the updates since the last read
  /// the optimizer skipped (UpdateOutcome::skipped_in_read). Before the
  /// after_update of the update that made the read, if any.
  virtual void after_update_checks(LoopState&, const UpdateOutcome&) {}
  virtual void before_test(LoopState&) {}
  virtual void after_test_batch(LoopState&, int64_t /*done*/, int64_t /*total*/) {}
  virtual void after_test(LoopState&, const MeterValues&) {}
  virtual void before_checkpoint(LoopState&) {}
  virtual void after_checkpoint(LoopState&, const std::string& /*path*/) {}

  /// Between iterations, before the next batch is fetched (the place to
  /// request_checkpoint() or request_stop()); after_fetch when it came (or
  /// the epoch's data ran out: `got` false).
  virtual void before_fetch(LoopState&) {}
  virtual void after_fetch(LoopState&, bool /*got*/) {}
  /// The epoch's training ended: add values to its train log line.
  virtual void epoch_trained(LoopState&, MeterValues& /*line*/) {}
  /// The test pass ran: add values to its test log line (before after_test).
  virtual void after_test_pass(LoopState&, MeterValues& /*line*/) {}
  /// State this hook keeps in every checkpoint, under its own key (null: none).
  virtual CheckpointPart* checkpoint_part() { return nullptr; }
  /// The loop was resumed from `path` (checkpoint_part() loaded where the file had it).
  virtual void after_resume(LoopState&, const CheckpointState&, const std::string& /*path*/) {}
  /// This stage starts where `previous` (the stage before) ended; the
  /// network already holds its weights.
  virtual void continue_stage(LoopState& /*loop*/, LoopState& /*previous*/) {}
  /// The run stops on `error` (bad input, a component's failure, a
  /// non-finite stop, a stall): the place to finish what must be whole
  /// before the process ends (a checkpoint being written). The error goes on
  /// to the caller; a hook that throws here is logged and passed over.
  virtual void on_exception(LoopState&, const std::exception_ptr& /*error*/) {}
};

/// The hooks of one loop, kept in (priority, order added).
class Hooks {
 public:
  void add(std::shared_ptr<HostHook> hook, int64_t priority);
  /// Calls `event` on every hook, in order.
  template <class F>
  void each(F&& event) {
    for (auto& entry : entries_) event(*entry.hook);
  }
  /// The first hook of type T, or null.
  template <class T>
  T* find() const {
    for (const auto& entry : entries_)
      if (auto* hook = dynamic_cast<T*>(entry.hook.get())) return hook;
    return nullptr;
  }
  /// Every hook's checkpoint_part(), in order: what a checkpoint holds besides the loop's state.
  std::vector<CheckpointPart*> checkpoint_parts() const;
  /// "high: keep best checkpoint", ... in the order they run.
  std::vector<std::string> listing() const;

 private:
  struct Entry {
    int64_t priority;
    std::shared_ptr<HostHook> hook;
  };
  std::vector<Entry> entries_;
};

/// A user's callback component as a hook at its `priority:`; each event runs
/// guarded (a failure names the callback), after_test_batch only for plugins
/// that have it (SDK 1.1).
std::shared_ptr<HostHook> callback_hook(const Built<Callback>& callback);

}  // namespace trainyard::host
