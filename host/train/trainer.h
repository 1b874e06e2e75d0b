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
#include "train/checkpoint.h"
#include "train/precision.h"
#include "train/components.h"
#include "trainyard/loop.h"

namespace trainyard::host {
class Communicator;
class GradientReducer;
}

namespace trainyard::host {

struct RunPaths {
  std::string run_dir;
  std::string checkpoints;  ///< run_dir/checkpoints
  std::string metrics;      ///< run_dir/metrics.jsonl
  std::string summary;      ///< run_dir/summary.json
  explicit RunPaths(const std::string& dir);
};

/// Clamps every gradient to [-max_value, max_value] (0: no clamp), then scales
/// them all down to a global L2 norm of at most max_norm (0: no scaling).
/// Returns the global norm after clamping and before scaling.
double clip_gradients(std::vector<at::Tensor>& grads, double max_value, double max_norm);

/// The training split's epoch plan and a split's loader settings, as the
/// experiment says (shared by the trainer and `trainyard iterate`).
EpochPlan make_epoch_plan(const Experiment& experiment, int64_t dataset_size, const Context& context);
LoaderOptions make_loader_options(const Experiment& experiment, const ComponentConfig& data, int64_t batch_size,
                                  const Context& context);

/// Where a stage of a multi-stage run sits in it.
struct StageInfo {
  int64_t index = 0, count = 1;
  std::string name;
  int64_t first_epoch = 0;      ///< epochs of all earlier stages
  int64_t first_iteration = 0;  ///< the iteration at which this stage began
};

class Trainer final : public Loop {
 public:
  Trainer(const Experiment& experiment, Components components, Context context, RunPaths paths);

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
  torch::optim::Optimizer& optimizer() override { return *c_.optimizer; }
  const Dataset& train_dataset() const override { return *c_.train_data.object; }
  const Dataset& test_dataset() const override;
  int64_t epoch() const override { return at_.epoch; }
  int64_t epochs() const override { return stage_.first_epoch + e_.loop.epochs; }  ///< where this stage ends
  int64_t iteration() const override { return at_.iteration; }
  int64_t position() const override { return at_.position; }
  /// The plan's batches per epoch; when an override replaced train_batches
  /// (its length is its own), the length of the last epoch it trained.
  int64_t iterations_per_epoch() const override {
    return custom_batches_ && last_epoch_length_ > 0 ? last_epoch_length_ : plan_.batches_per_epoch();
  }
  int64_t batch_size() const override { return e_.loop.batch_per_device; }
  const MeterValues& values() const override { return values_; }
  const std::map<std::string, MeterReading>& meter_readings() const override { return readings_; }  // SDK 1.0
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
  void set_fixed_lr(std::optional<double> lr);
  /// The test meters over the test set on the current weights (what the
  /// test stage computes), without logging or callbacks: `trainyard eval`.
  MeterValues test_pass();
  /// --debug: stop on the first non-finite loss, gradient or parameter, with
  /// the forward operation that produced it named; nothing is checkpointed.
  void set_debug(bool on) { debug_ = on; }
  /// Makes this a data-parallel run: gradients averaged, meters summed and
  /// stops agreed over ranks; only rank 0 writes files.
  void set_communicator(Communicator* comm);

 private:
  void default_run();
  bool default_should_continue();
  void default_epoch(int64_t epoch);
  BatchStream default_train_batches(int64_t epoch);
  StepResult default_train_step(const Batch& batch);
  MeterValues default_test();
  void default_checkpoint();

  void install_overrides();
  template <class F>
  void each_callback(const char* stage, F&& f);
  MeterValues meter_values(const std::vector<Built<Meter>>& meters, const std::string& prefix);
  bool writes_files() const { return context_.rank == 0; }
  void empty_step();
  /// Ends an optimizer update: gradients averaged over ranks, rescaled for a
  /// short accumulation, clipped, the schedule's rate set, one step.
  void finish_update();
  void apply_schedule();
  /// After an epoch's test: target reached? no improvement for `patience`?
  /// Returns true when this epoch is the best so far (for best.pt).
  bool judge_epoch();
  /// The stop message when the stopping target is met by the current values;
  /// "" when not met or no target is set; nullopt when the target's meter has no value.
  std::optional<std::string> target_reached() const;
  bool minimized(const std::string& meter) const;  ///< stopping.mode for this meter
  std::string stopping_where(const std::string& key) const;  ///< "FILE:LINE:COL: stopping.KEY"
  void write_summary(double wall_s);

  const Experiment& e_;
  Components c_;
  Context context_;
  RunPaths paths_;
  EpochPlan plan_;
  Stages stages_;

  LoopPosition at_;
  MeterValues values_;
  std::map<std::string, MeterReading> readings_;  ///< SDK 1.0: when each meter value was computed
  std::string stop_reason_;
  int64_t tested_at_ = -1;  ///< iteration of the last periodic test
  int64_t micro_ = 0;        ///< backward passes accumulated into the coming update
  double grad_norm_ = 0;     ///< global gradient norm before clipping, at the last update
  LossScaler scaler_;        ///< fp16-mixed only
  std::vector<double> base_lrs_;  ///< each group's starting learning rate
  std::optional<double> fixed_lr_;  ///< find-lr: overrides the schedule
  double best_ = 0;               ///< stopping: best monitor value
  bool has_best_ = false;
  int64_t bad_epochs_ = 0;
  bool criterion_stop_ = false;   ///< the stop came from `stopping:` (ends the stage only)
  StageInfo stage_;
  bool debug_ = false;
  bool signal_stop_ = false;
  std::string config_hash_;  ///< of the resolved experiment, for checkpoint manifests
  /// When this process began on the run (the first stage's trainer): summary.json's wall_s.
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_checkpoint_ = std::chrono::steady_clock::now();
  /// A stop signal arrived: stop at this iteration boundary (with a checkpoint).
  void check_stop_signal();
  const Batch* batch_ = nullptr;        ///< the batch being trained on (for diagnoses)
  at::Tensor last_output_;             ///< its output
  bool loss_finite_ = true;            ///< every loss of the coming update was finite
  int64_t skipped_in_a_row_ = 0, skipped_updates_ = 0;
  /// A non-finite loss or gradient: skip the update, or stop naming the cause.
  /// Returns true when the update must not happen.
  bool handle_nonfinite();
  /// The network's parameters, listed once (loading a checkpoint keeps the
  /// same tensors): finish_update reads their gradients at every update.
  std::vector<at::Tensor> parameters_;
  bool custom_batches_ = false;    ///< an override replaced train_batches
  int64_t last_epoch_length_ = 0;  ///< train batches of the last completed epoch
  Communicator* comm_ = nullptr;
  std::shared_ptr<GradientReducer> reducer_;
  std::shared_ptr<LoaderStats> train_stats_ = std::make_shared<LoaderStats>();
  std::shared_ptr<LoaderStats> test_stats_ = std::make_shared<LoaderStats>();
  double secs_per_train_ = 0, samples_per_sec_ = 0;
};

}  // namespace trainyard::host
