#pragma once
/// What callbacks and overrides see of the training loop.
///
/// The loop is a table of named stages (Stages). Each default stage calls the
/// others through the table, so an additional_override that replaces one slot
/// changes every place it is used. The table is written once, in
/// TRAINYARD_STAGES below: the Stages fields, kStageNames (as YAML and error
/// messages spell them) and Stages::for_each all come from it. Stage names, in
/// the order a run meets them:
///
///   run              the whole run: epochs while should_continue()
///   should_continue  whether to start another epoch
///   epoch            one epoch: train on train_batches(e), test every N
///                    iterations and at the end, then checkpoint
///   train_batches    the batches an epoch trains on
///   train_step       forward, loss, backward, optimizer step on one batch
///   test             a pass over the test samples; returns the test values
///   checkpoint       save network, optimizer, position, RNG state
///   schedule         the learning-rate factor at an optimizer step: each
///                    parameter group trains at its starting rate times this;
///                    the default follows the YAML `schedule:` section
///
/// Where the loop is in each stage: epoch(), position(), iteration(). Counts
/// are of completed work: epoch() is the epochs completed, which is also the
/// 0-based index of the epoch being trained (e below); position() the train
/// batches completed in that epoch; iteration() the train batches completed
/// since the run began (resumes included). A run resumed in mid-epoch starts
/// with its saved position().
///
///   stage or hook                      epoch()  position()               iteration()
///   run, before_run                    done     resumed position, else 0 done before
///   should_continue                    e        0 (resumed, first time)  done so far
///   epoch(e), before_epoch             e        0 (resumed, first epoch) done so far
///   train_batches(e)                   e        first batch to yield     done so far
///   train_step, before_train_iter      e        index of this batch      before this batch
///   schedule (inside train_step)       e        index of this batch      before this batch
///   after_train_iter                   e        this batch counted       this batch counted
///   test, before_test, after_test
///     in mid-epoch (test_every_iters)  e        batches done             done so far
///     at the epoch's end               e + 1    0                        done so far
///   checkpoint, before_checkpoint, after_checkpoint
///     at the epoch's end               e + 1    0                        done so far
///     in mid-epoch (checkpoint.every_iters or every_secs, a stop request)
///                                      e        batches done             done so far
///   after_epoch                        e + 1    0                        done so far
///   after_run                          done     0 (batches done when a   done so far
///                                               stop ended it mid-epoch)
///
/// So the first epoch's after_epoch sees epoch() == 1. An epoch that ends
/// inside a gradient accumulation calls schedule once more, with position()
/// equal to the batches done. meter_readings() says at which epoch() and
/// iteration() each meter value was computed.
///
/// Example (inside a callback):
///   void after_train_iter(trainyard::Loop& loop, const trainyard::StepResult& r) override {
///     if (loop.iteration() % 100 == 0) loop.context().log("loss " + std::to_string(r.loss.item<double>()));
///   }

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

#include "trainyard/batch.h"
#include "trainyard/context.h"

namespace torch::optim {
class Optimizer;
}

namespace trainyard {

class Network;
class Dataset;

/// Meter values by name, e.g. {"test_accuracy_top1": 0.87}.
using MeterValues = std::map<std::string, double>;

/// One meter value and when it was computed: the loop's epoch() and
/// iteration() at that moment. A test value whose iteration is older than
/// the current one was left over from an earlier test pass (for example when
/// an override skipped the test).
///
/// Example:
///   const auto& r = loop.meter_readings();
///   auto it = r.find("test_accuracy_top1");
///   bool fresh = it != r.end() && it->second.iteration == loop.iteration();
struct MeterReading {
  double value = 0;
  int64_t epoch = 0;
  int64_t iteration = 0;
};

/// What a train step produced. `output` and `loss` are detached.
struct StepResult {
  Batch batch;
  at::Tensor output;
  at::Tensor loss;
};

/// Pulls the next batch; an empty optional ends the epoch.
using BatchStream = std::function<std::optional<Batch>()>;

/// The stage table: X(name, signature) for each stage, in the order a run
/// meets them. `schedule(step, total_steps)`: the factor at `step` of
/// `total_steps`, both counted in the schedule's unit (optimizer updates, or
/// epochs with `schedule.unit: epoch`) from the start of the run (or of the
/// current stage of a multi-stage run).
#define TRAINYARD_STAGES(X)                     \
  X(run, void())                                \
  X(should_continue, bool())                    \
  X(epoch, void(int64_t epoch))                 \
  X(train_batches, BatchStream(int64_t epoch))  \
  X(train_step, StepResult(const Batch& batch)) \
  X(test, MeterValues())                        \
  X(checkpoint, void())                         \
  X(schedule, double(int64_t step, int64_t total_steps))

#define TRAINYARD_STAGE_FIELD_(name, signature) std::function<signature> name;
#define TRAINYARD_STAGE_NAME_(name, signature) #name,
#define TRAINYARD_STAGE_VISIT_(name, signature) f(#name, name);

/// The replaceable stages. An override keeps the previous value of a slot to
/// call the default it replaces.
///
/// Example (count test passes, then run the default):
///   s.test = [previous = s.test, this] { ++tests_; return previous(); };
struct Stages {
  TRAINYARD_STAGES(TRAINYARD_STAGE_FIELD_)

  /// Calls f(name, slot) for every stage, in table order; `slot` is the
  /// std::function of that stage (a different type for each).
  template <class F>
  void for_each(F&& f) {
    TRAINYARD_STAGES(TRAINYARD_STAGE_VISIT_)
  }
};

/// The stage names, as YAML and error messages spell them.
inline constexpr const char* kStageNames[] = {TRAINYARD_STAGES(TRAINYARD_STAGE_NAME_)};

#undef TRAINYARD_STAGE_FIELD_
#undef TRAINYARD_STAGE_NAME_
#undef TRAINYARD_STAGE_VISIT_

/// The loop as callbacks and overrides see it (implemented by the host).
/// The table above says what epoch(), position() and iteration() return in
/// each stage and callback hook.
///
/// Example: see the header comment.
class Loop {
 public:
  virtual ~Loop();
  virtual const Context& context() const = 0;
  virtual Network& network() = 0;
  virtual torch::optim::Optimizer& optimizer() = 0;
  virtual const Dataset& train_dataset() const = 0;
  virtual const Dataset& test_dataset() const = 0;

  virtual int64_t epoch() const = 0;      ///< epochs completed (index of the current one)
  virtual int64_t epochs() const = 0;     ///< loop.epochs
  virtual int64_t iteration() const = 0;  ///< train iterations since the run began
  virtual int64_t position() const = 0;   ///< train batches done in the current epoch
  /// Train batches per epoch. When an additional_override replaced
  /// train_batches, the host cannot know the length in advance: this is
  /// then the length of the last completed epoch (the plan's before the first).
  virtual int64_t iterations_per_epoch() const = 0;
  virtual int64_t batch_size() const = 0;

  /// Latest value of every meter, phase-prefixed (train_loss, test_accuracy_top1, ...).
  virtual const MeterValues& values() const = 0;
  /// The meters' latest values with the epoch() and iteration() at which
  /// each was computed (phase-prefixed names, as values()). Inside
  /// after_test the fresh test values are its argument: the loop takes them
  /// in after the hook. A value restored from a checkpoint has no reading
  /// until its meter computes again.
  virtual const std::map<std::string, MeterReading>& meter_readings() const = 0;
  /// Appends one event to metrics.jsonl (phase: "train", "test" or your own).
  virtual void log(const std::string& phase, const MeterValues& values) = 0;
  /// Ends the run after the current iteration; the reason goes to the log.
  virtual void request_stop(const std::string& reason) = 0;
  virtual bool stop_requested() const = 0;

  /// The stage table in force (with every override applied).
  virtual Stages& stages() = 0;
};

}  // namespace trainyard
