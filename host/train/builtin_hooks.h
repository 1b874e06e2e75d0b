#pragma once
// The host's own duties around the loop, as hooks (train/hooks.h). The
// assembler (run/assembly.cpp) adds them to every loop it builds, each with
// its settings:
//
//   event                 priority      hook
//   after_train_iter,     highest       update check reads: the checks kept on the device read
//     epoch_trained,                      every loop.log_every_iters, at the epoch's end and
//     before_checkpoint                   before a checkpoint (loop.nonfinite acted on)
//   on_exception          highest       whole checkpoint on error: the write in flight finished
//   before/after_fetch,   highest       throughput: samples/s, input wait, comm share
//     epoch_trained                       on the epoch's train line
//   epoch_trained         highest       bad records: the training split's skipped records
//   before_fetch          highest       timed checkpoint: every checkpoint.every_secs
//   after_test            high          test meter results: the meters' files (meter_results.h)
//   after_checkpoint      high          keep best checkpoint: best.pt when the epoch improved
//   (users' callbacks: normal, 0, unless their priority: says otherwise)
//   after_train_iter      below_normal  periodic train log: every loop.log_every_iters
//   after_train_iter      low           periodic test: every loop.test_every_iters
//   after_train_iter      very_low      periodic checkpoint: every checkpoint.every_iters
//   after_run             lowest        run summary: summary.json
//
// With callbacks at the default priority this is the order trainyard has
// always had; a callback at priority 15 runs after the periodic train log and
// before the periodic test of the same iteration.
#include <cstdint>
#include <string>

namespace trainyard::host {

class Hooks;

/// What the built-in hooks read of the experiment.
struct BuiltinHookSettings {
  int64_t log_every_iters = 50;        ///< loop.log_every_iters
  int64_t test_every_iters = 0;        ///< loop.test_every_iters (0: at epoch ends only)
  int64_t checkpoint_every_iters = 0;  ///< checkpoint.every_iters (0: at epoch ends only)
  double checkpoint_every_secs = 0;    ///< checkpoint.every_secs (0: not by time)
  double stall_timeout_secs = 0;       ///< loop.stall_timeout_secs: how long other ranks wait for rank 0's writes
  bool keep_best = true;               ///< checkpoint.keep_best
  std::string experiment;              ///< the experiment's name, for summary.json
  std::string monitor;                 ///< stopping.monitor, for summary.json's best value
};

void add_builtin_hooks(Hooks& hooks, const BuiltinHookSettings& settings);

}  // namespace trainyard::host
