#pragma once
// The loop's events and who hears them, in one order: the users' callbacks
// and the host's own duties (test results on disk, the best checkpoint, the
// periodic train log, test and checkpoint) are hooks alike, ordered by
// priority. A new duty (weight averaging, a profiler) lands as a hook: the
// loop does not change.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/components.h"
#include "train/update.h"
#include "trainyard/callback.h"

namespace trainyard::host {

class Trainer;

/// Named priorities on the scale of a callback's `priority:` (lower runs
/// first, ties in the order added; users' callbacks default to normal, 0).
/// MMEngine's nine levels (priority.py), centred on 0.
namespace priority {
inline constexpr int64_t highest = -50, very_high = -40, high = -20, above_normal = -10, normal = 0, below_normal = 10,
                         low = 20, very_low = 40, lowest = 50;
/// "high", "normal (0)", "15": how a priority is named in `hooks()` listings.
std::string name(int64_t value);
}  // namespace priority

/// A listener to the loop. The SDK's Callback events, on the host's Trainer,
/// plus after_update (after each optimizer step, not each batch: iter_size
/// batches make one update).
class HostHook {
 public:
  virtual ~HostHook() = default;
  /// "keep best checkpoint", "callback 'console' (libconsole.so)": for listings and errors.
  virtual std::string name() const = 0;
  virtual void before_run(Trainer&) {}
  virtual void after_run(Trainer&) {}
  virtual void before_epoch(Trainer&) {}
  /// Before the epoch's checkpoint, so that no call is lost to a failure
  /// (Trainer::default_epoch); what needs that checkpoint on disk listens to
  /// after_checkpoint and asks Trainer::epoch_end_checkpoint().
  virtual void after_epoch(Trainer&) {}
  virtual void before_train_iter(Trainer&, const Batch&) {}
  virtual void after_train_iter(Trainer&, const StepResult&) {}
  virtual void after_update(Trainer&, const UpdateOutcome&) {}
  virtual void before_test(Trainer&) {}
  virtual void after_test_batch(Trainer&, int64_t /*done*/, int64_t /*total*/) {}
  virtual void after_test(Trainer&, const MeterValues&) {}
  virtual void before_checkpoint(Trainer&) {}
  virtual void after_checkpoint(Trainer&, const std::string& /*path*/) {}
};

/// The hooks of one Trainer, kept in (priority, order added).
class Hooks {
 public:
  void add(std::shared_ptr<HostHook> hook, int64_t priority);
  /// Calls `event` on every hook, in order.
  template <class F>
  void each(F&& event) {
    for (auto& entry : entries_) event(*entry.hook);
  }
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
