#include "run/run_hooks.h"

#include <atomic>

#include "train/hooks.h"
#include "train/profiler.h"
#include "util/process.h"

namespace trainyard::host {
namespace {

// --until-epoch N: a stop requested once N epochs (of all stages) are done,
// after that epoch's test and checkpoint; not a stopping criterion, so the
// next `trainyard run` continues the same schedule.
class UntilEpoch final : public HostHook {
 public:
  explicit UntilEpoch(int64_t epochs) : epochs_(epochs) {}
  std::string name() const override { return "--until-epoch"; }
  void before_run(LoopState& t) override { check(t); }
  void after_epoch(LoopState& t) override { check(t); }

 private:
  void check(LoopState& t) {
    if (t.epoch() >= epochs_ && !t.stop_requested())
      t.request_stop("--until-epoch " + std::to_string(epochs_) + " reached");
  }
  int64_t epochs_;
};

// Tells the stall watchdog where the loop is (one relaxed store each): at
// every iteration boundary, and once a step is done, so that a hang in its
// after_train_iter names that iteration.
class WatchedPosition final : public HostHook {
 public:
  std::string name() const override { return "stall watchdog's position"; }
  void before_fetch(LoopState& t) override { mark(t); }
  void after_train_iter(LoopState& t, const StepResult&) override { mark(t); }

 private:
  static void mark(const LoopState& t) {
    WatchedProgress& p = watched_progress();
    p.epoch.store(t.epoch(), std::memory_order_relaxed);
    p.iteration.store(t.iteration(), std::memory_order_relaxed);
    heartbeat();
  }
};

}  // namespace

TrainingSettings training_run_settings(const RunRequest& request, const std::string& profile_dir) {
  TrainingSettings settings;
  settings.debug = request.debug;
  settings.hooks.push_back({std::make_shared<WatchedPosition>(), priority::highest});
  if (!request.profile.empty()) {
    const ProfileWindow window = parse_profile_window(request.profile);
    settings.profile_skip = window.skip;
    // A step ends after its iteration's other hooks.
    settings.hooks.push_back({profiler_hook(window, profile_dir), priority::lowest});
  }
  // After best.pt and the callbacks' after_epoch.
  if (request.until_epoch > 0)
    settings.hooks.push_back({std::make_shared<UntilEpoch>(request.until_epoch), priority::lowest});
  return settings;
}

}  // namespace trainyard::host
