#pragma once
// The host's own duties around the loop, as hooks (train/hooks.h). The
// assembler (run/assembly.cpp) adds them to every Trainer it builds:
//
//   event             priority      hook
//   after_test        high          test meter results: the meters' files (meter_results.h)
//   after_epoch       high          keep best checkpoint: best.pt when the epoch improved
//   (users' callbacks: normal, 0, unless their priority: says otherwise)
//   after_train_iter  below_normal  periodic train log: every loop.log_every_iters
//   after_train_iter  low           periodic test: every loop.test_every_iters
//   after_train_iter  very_low      periodic checkpoint: every loop.checkpoint_every_iters
//
// With callbacks at the default priority this is the order trainyard has
// always had; a callback at priority 15 runs after the periodic train log and
// before the periodic test of the same iteration.
namespace trainyard::host {

class Trainer;

void add_builtin_hooks(Trainer& trainer);

}  // namespace trainyard::host
