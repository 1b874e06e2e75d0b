#pragma once
/// What callbacks and overrides see of the training loop.
///
/// The loop is a table of named stages (Stages). Each default stage calls the
/// others through the table, so an additional_override that replaces one slot
/// changes every place it is used. Stage names, in the order a run meets them:
///
///   run              the whole run: epochs while should_continue()
///   should_continue  whether to start another epoch
///   epoch            one epoch: train on train_batches(e), test every N
///                    iterations and at the end, then checkpoint
///   train_batches    the batches an epoch trains on
///   train_step       forward, loss, backward, optimizer step on one batch
///   test             a pass over the test samples; returns the test values
///   checkpoint       save network, optimizer, position, RNG state
///   schedule         the learning-rate factor at an optimizer step (API 1.3):
///                    each parameter group trains at its starting rate times
///                    this; the default follows the YAML `schedule:` section
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

/// What a train step produced. `output` and `loss` are detached.
struct StepResult {
  Batch batch;
  at::Tensor output;
  at::Tensor loss;
};

/// Pulls the next batch; an empty optional ends the epoch.
using BatchStream = std::function<std::optional<Batch>()>;

/// The replaceable stages. An override keeps the previous value of a slot to
/// call the default it replaces.
struct Stages {
  std::function<void()> run;
  std::function<bool()> should_continue;
  std::function<void(int64_t epoch)> epoch;
  std::function<BatchStream(int64_t epoch)> train_batches;
  std::function<StepResult(const Batch&)> train_step;
  std::function<MeterValues()> test;
  std::function<void()> checkpoint;
  // Appended in SDK API 1.3:
  /// Factor at `step` of `total_steps`, both counted in the schedule's unit
  /// (optimizer updates, or epochs with `schedule.unit: epoch`) from the
  /// start of the run (or of the current stage of a multi-stage run).
  std::function<double(int64_t step, int64_t total_steps)> schedule;
};

/// The stage names, as YAML and error messages spell them.
inline constexpr const char* kStageNames[] = {"run",         "should_continue", "epoch",
                                              "train_batches", "train_step",    "test",
                                              "checkpoint", "schedule"};

class Loop {
 public:
  virtual ~Loop();
  virtual const Context& context() const = 0;
  virtual Network& network() = 0;
  virtual torch::optim::Optimizer& optimizer() = 0;
  virtual const Dataset& train_dataset() const = 0;
  virtual const Dataset& test_dataset() const = 0;

  virtual int64_t epoch() const = 0;                 ///< epochs completed (index of the current one)
  virtual int64_t epochs() const = 0;                ///< loop.epochs
  virtual int64_t iteration() const = 0;             ///< train iterations since the run began
  virtual int64_t position() const = 0;              ///< train batches done in the current epoch
  /// Train batches per epoch. When an additional_override replaced
  /// train_batches, the host cannot know the length in advance: this is
  /// then the length of the last completed epoch (the plan's before the first).
  virtual int64_t iterations_per_epoch() const = 0;
  virtual int64_t batch_size() const = 0;

  /// Latest value of every meter, phase-prefixed (train_loss, test_accuracy_top1, ...).
  virtual const MeterValues& values() const = 0;
  /// Appends one event to metrics.jsonl (phase: "train", "test" or your own).
  virtual void log(const std::string& phase, const MeterValues& values) = 0;
  /// Ends the run after the current iteration; the reason goes to the log.
  virtual void request_stop(const std::string& reason) = 0;
  virtual bool stop_requested() const = 0;

  /// The stage table in force (with every override applied).
  virtual Stages& stages() = 0;
};

}  // namespace trainyard
