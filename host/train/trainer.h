#pragma once
// The train/test loop as a table of replaceable stages (Caffe2 Playground's
// iteration scheme: epochs of train iterations, a test pass every N
// iterations and at each epoch end, a checkpoint at each epoch end).
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "config/experiment.h"
#include "data/loader.h"
#include "formats/run_paths.h"
#include "train/checkpoint_store.h"
#include "train/components.h"
#include "train/hooks.h"
#include "train/loader_settings.h"
#include "train/run_log.h"
#include "train/stopping.h"
#include "train/update.h"
#include "trainyard/loop.h"

namespace trainyard::host {
class Communicator;
class GradientReducer;
class WeightAverage;
}  // namespace trainyard::host

namespace trainyard::host {

/// Where a stage of a multi-stage run sits in it.
struct StageInfo {
  int64_t index = 0, count = 1;
  std::string name;
  int64_t first_epoch = 0;      ///< epochs of all earlier stages
  int64_t first_iteration = 0;  ///< the iteration at which this stage began
};

/// The loop alone: epochs of train steps, test passes and checkpoints as a
/// table of replaceable stages. What an update does is the Updater's; when to
/// stop, the StoppingRule's; the files, the RunLog's and the CheckpointStore's.
class Trainer final : public Loop {
 public:
  /// `store`: the run's checkpoints (one store per run, shared with the
  /// Runner); null makes one over paths.checkpoints.
  Trainer(const Experiment& experiment, Components components, Context context, RunPaths paths,
          std::shared_ptr<CheckpointStore> store = nullptr);
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Continues from a checkpoint (network, optimizer, RNG, position, meters).
  void resume(const std::string& checkpoint, Verify verify = Verify::yes);
  /// Installs the overrides, runs the `run` stage, writes summary.json.
  void run();

  // Loop
  const Context& context() const override { return context_; }
  Network& network() override { return *c_.network.object; }
  /// The network's forward under loop.precision's autocast, its output as
  /// fp32: what training, testing and prediction all call.
  at::Tensor forward(const Batch& batch);
  std::shared_ptr<Network> network_module() { return c_.network.object; }
  /// What the loop runs: the built components and the configs they came from.
  const Components& components() const { return c_; }
  torch::optim::Optimizer& optimizer() override { return *c_.optimizer; }
  const Dataset& train_dataset() const override { return *c_.train_data.object; }
  const Dataset& test_dataset() const override;
  int64_t epoch() const override { return at_.epoch; }
  int64_t epochs() const override { return stage_.first_epoch + e_.loop.epochs; }  ///< where this stage ends
  int64_t iteration() const override { return at_.iteration; }
  int64_t position() const override { return at_.position; }
  /// The sampler's batches per epoch; when an override replaced train_batches
  /// (its length is its own), the length of the last epoch it trained.
  int64_t iterations_per_epoch() const override {
    return custom_batches_ && last_epoch_length_ > 0 ? last_epoch_length_ : sampler_->batches_per_epoch();
  }
  int64_t batch_size() const override { return e_.loop.batch_per_device; }
  const MeterValues& values() const override { return values_; }
  const std::map<std::string, MeterReading>& meter_readings() const override { return readings_; }
  void log(const std::string& phase, const MeterValues& values) override;
  void request_stop(const std::string& reason) override;
  bool stop_requested() const override { return !stop_reason_.empty(); }
  Stages& stages() override { return stages_; }

  LoopPosition position_state() const { return at_; }
  int64_t iter_size() const { return e_.loop.iter_size; }
  const StageInfo& stage() const { return stage_; }
  void set_stage(const StageInfo& stage) { stage_ = stage; }
  /// Starts this stage where `previous` (the stage before) ended: its
  /// position, its weights and batch norm statistics, its meter values, and
  /// its best value when both watch the same meter.
  void continue_from(Trainer& previous);
  /// The run stopped for another reason than this stage's stopping criteria
  /// (a callback, a signal): later stages must not start.
  bool ended_by_request() const { return stop_requested() && !criterion_stop_; }
  /// A stop signal (on this rank or another) ended the run; it is resumable.
  bool stopped_by_signal() const { return signal_stop_; }
  /// Every update at this rate (groups keep their ratios to the first group)
  /// instead of the schedule's; nullopt puts the starting rates back.
  void set_fixed_lr(std::optional<double> lr) { updater_.set_fixed_lr(lr); }
  /// The test meters over the test set on the current weights (what the
  /// test stage computes), without logging or callbacks: `trainyard eval`.
  MeterValues test_pass();
  /// --debug: stop on the first non-finite loss, gradient or parameter, with
  /// the forward operation that produced it named; nothing is checkpointed.
  void set_debug(bool on) { debug_ = on, updater_.set_debug(on); }
  /// Makes this a data-parallel run: gradients averaged, meters summed and
  /// stops agreed over ranks; only rank 0 writes files.
  void set_communicator(Communicator* comm);

  // For hooks (train/builtin_hooks.h and later ones): what the loop holds.
  /// The loop's listeners: the users' callbacks (added here, at their
  /// priority) and what the assembler adds (add_builtin_hooks()).
  Hooks& hooks() { return hooks_; }
  const Experiment& experiment() const { return e_; }
  const RunPaths& paths() const { return paths_; }
  /// Null in a single-process run.
  Communicator* communicator() const { return comm_; }
  /// The `ema:` average: checkpointed with the weights, tested with
  /// ema.evaluate (the assembler sets it and adds its hook); null without.
  void set_weight_average(std::shared_ptr<WeightAverage> average) { ema_ = std::move(average); }
  WeightAverage* weight_average() const { return ema_.get(); }
  CheckpointStore& checkpoints() { return *store_; }
  /// Rank 0 writes the run's files; the other ranks write nothing.
  bool writes_files() const { return context_.rank == 0; }
  /// The epoch that just ended improved the stopping rule's monitored value.
  bool epoch_improved() const { return epoch_improved_; }
  /// The checkpoint being written is the one at an epoch's end (after its
  /// after_epoch callbacks), not a periodic or stop-request one.
  bool epoch_end_checkpoint() const { return epoch_end_checkpoint_; }
  /// The train meters' values over all ranks, named train_*.
  MeterValues train_meter_values() { return meter_values(c_.train_meters, "train_"); }
  /// Adds what the last update says to a train log line: lr, grad_norm, and
  /// loss_scale, scaler_skipped_updates and skipped_updates where kept.
  void add_update_values(MeterValues& v) const;
  /// Makes `values` the latest of values() (and meter_readings(), at this epoch and iteration).
  void take_values(const MeterValues& values);
  /// A test ran at this iteration: the epoch's end does not test the same state again.
  void mark_tested() { tested_at_ = at_.iteration; }
  double lr() const { return updater_.lr(); }
  double grad_norm() const { return updater_.grad_norm(); }

 private:
  void default_run();
  bool default_should_continue();
  void default_epoch(int64_t epoch);
  BatchStream default_train_batches(int64_t epoch);
  StepResult default_train_step(const Batch& batch);
  MeterValues default_test();
  void default_checkpoint();

  void install_overrides();
  MeterValues meter_values(const std::vector<Built<Meter>>& meters, const std::string& prefix);
  /// Ends the update (Updater::finish) and tells the hooks when it stepped.
  void finish_update();
  /// This rank's shard ran out before another's: take part in the update with zeros.
  void empty_step();
  UpdateClock clock() const;
  /// After an epoch's test: the stopping rule's verdict applied. Returns
  /// true when this epoch is the best so far (for best.pt).
  bool judge_epoch();
  /// A stop signal arrived: stop at this iteration boundary (with a checkpoint).
  void check_stop_signal();
  /// Tells the stall watchdog where the loop is (one relaxed store each).
  void mark_progress() const;
  void write_summary(double wall_s);

  const Experiment& e_;
  Components c_;
  Context context_;
  RunPaths paths_;
  std::unique_ptr<Sampler> sampler_;  ///< the training set's order: make_sampler()
  Stages stages_;
  Updater updater_;
  Hooks hooks_;
  StoppingRule stopping_;
  RunLog log_;
  std::shared_ptr<CheckpointStore> store_;

  LoopPosition at_;
  MeterValues values_;
  std::map<std::string, MeterReading> readings_;  ///< when each meter value was computed
  std::string stop_reason_;
  int64_t tested_at_ = -1;             ///< iteration of the last periodic test
  bool criterion_stop_ = false;        ///< the stop came from `stopping:` (ends the stage only)
  bool epoch_improved_ = false;        ///< the last judged epoch was the best so far
  bool epoch_end_checkpoint_ = false;  ///< the epoch-end checkpoint is being written
  StageInfo stage_;
  bool debug_ = false;
  bool signal_stop_ = false;
  std::string config_hash_;                 ///< of the resolved experiment, for checkpoint manifests
  nlohmann::ordered_json config_resolved_;  ///< the resolved experiment itself, for checkpoint manifests
  /// When this process began on the run (the first stage's trainer): summary.json's wall_s.
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_checkpoint_ = std::chrono::steady_clock::now();
  bool custom_batches_ = false;    ///< an override replaced train_batches
  int64_t last_epoch_length_ = 0;  ///< train batches of the last completed epoch
  Communicator* comm_ = nullptr;
  std::shared_ptr<GradientReducer> reducer_;
  std::shared_ptr<WeightAverage> ema_;
  std::shared_ptr<LoaderStats> train_stats_ = std::make_shared<LoaderStats>();
  std::shared_ptr<LoaderStats> test_stats_ = std::make_shared<LoaderStats>();
  double secs_per_train_ = 0, samples_per_sec_ = 0;
};

}  // namespace trainyard::host
