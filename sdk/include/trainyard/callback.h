#pragma once
/// Callback components: receive the loop's stages, in order of priority
/// (lower runs first; default 0; ties keep the YAML order). An exception
/// thrown here stops the run and is reported with the callback's name.
///
/// Example:
///   class PrintEpoch : public trainyard::Callback {
///     void after_epoch(trainyard::Loop& loop) override {
///       std::printf("epoch %lld done\n", (long long)loop.epoch());
///     }
///   };

#include <string>

#include "trainyard/loop.h"

namespace trainyard {

class Callback {
 public:
  virtual ~Callback();
  virtual void before_run(Loop&) {}
  virtual void after_run(Loop&) {}
  virtual void before_epoch(Loop&) {}
  /// After an epoch's test and before its checkpoint: the
  /// checkpoint holds what it did; if it throws, the run resumes from the
  /// checkpoint before, trains to this epoch's end again and calls it again.
  virtual void after_epoch(Loop&) {}
  virtual void before_train_iter(Loop&, const Batch&) {}
  virtual void after_train_iter(Loop&, const StepResult&) {}
  virtual void before_test(Loop&) {}
  virtual void after_test(Loop&, const MeterValues&) {}
  virtual void before_checkpoint(Loop&) {}
  virtual void after_checkpoint(Loop&, const std::string& /*path*/) {}
  /// Since SDK 1.1: after each batch of a test pass, this rank's count so far
  /// and its total for the pass (for progress). A host calls it only on
  /// plugins built with SDK 1.1 or later.
  virtual void after_test_batch(Loop&, int64_t /*batches_done*/, int64_t /*batches_total*/) {}
};

}  // namespace trainyard
