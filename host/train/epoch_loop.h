#pragma once
// The loop alone: epochs of train steps, test passes and checkpoints as a
// table of replaceable stages (Caffe2 Playground's iteration scheme). What an
// update does is the Updater's; the order of samples, the Sampler's; when to
// stop, the StoppingRule's; how ranks agree, the RankAgreement's; a test
// pass, the Evaluator's; every other duty (logs, periodic tests and
// checkpoints, throughput, weight averaging, the summary, the profiler, the
// update's check reads, the users' callbacks) is a hook (train/hooks.h,
// train/builtin_hooks.h); another way to run a step replaces the train_step
// stage (train/captured_train_step.h); how checkpoints are written is the
// CheckpointStore's. A new duty does not edit this file (docs/architecture.md,
// "Where new things go").
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "config/experiment.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "formats/run_paths.h"
#include "train/checkpoint_store.h"
#include "train/components.h"
#include "train/evaluation.h"
#include "train/hooks.h"
#include "train/loader_settings.h"
#include "train/loop_checkpoint.h"
#include "train/meter_results.h"
#include "train/rank_agreement.h"
#include "train/run_log.h"
#include "train/stopping.h"
#include "train/update.h"
#include "trainyard/error.h"

namespace trainyard::host {

class GradientReducer;

class EpochLoop final : public LoopState {
 public:
  /// Takes the whole stage Experiment: the loop builds its units from their
  /// sections (Updater, Sampler, StoppingRule, Evaluator) and keeps only
  /// `loop:` and the resolved config for checkpoint manifests. `store`: the
  /// run's checkpoints (one per run, shared with the Runner); null makes one
  /// over paths.checkpoints.
  EpochLoop(const Experiment& stage, Components components, Context context, RunPaths paths,
            std::shared_ptr<CheckpointStore> store = nullptr);
  EpochLoop(const EpochLoop&) = delete;
  EpochLoop& operator=(const EpochLoop&) = delete;

  /// Continues from a checkpoint (network, optimizer, RNG, position, meters, hooks' parts).
  void resume(const std::string& checkpoint, Verify verify = Verify::yes);
  /// Starts this stage where `previous` (the stage before) ended: its
  /// position, its weights and batch norm statistics, its meter values, and
  /// its best value when both watch the same meter.
  void continue_from(EpochLoop& previous);
  /// Installs the overrides and runs the `run` stage.
  void run();

  /// Makes this a data-parallel run: gradients averaged, meters summed and
  /// stops agreed over ranks; only rank 0 writes files.
  void set_communicator(Communicator* comm);
  /// Asked at every iteration and epoch boundary: a stop signal's number
  /// (0: none). The Runner owns the signals; without this the loop never stops for one.
  void set_stop_signal(std::function<int()> poll) { stop_signal_ = std::move(poll); }
  /// --debug: stop on the first non-finite loss, gradient or parameter, with
  /// the forward operation that produced it named; nothing is checkpointed.
  void set_debug(bool on) { updater_.set_debug(on); }
  /// Every update at this rate (groups keep their ratios to the first group)
  /// instead of the schedule's; nullopt puts the starting rates back.
  void set_fixed_lr(std::optional<double> lr) { updater_.set_fixed_lr(lr); }

  const StageInfo& stage() const { return stage_info_; }
  void set_stage(const StageInfo& stage) { stage_info_ = stage; }
  int64_t iter_size() const { return loop_.iter_size; }
  /// The network's forward in the run's precision (train, test and find-lr call it).
  at::Tensor forward(const Batch& batch) const { return evaluator_.forward(batch); }
  std::shared_ptr<Network> network_module() { return c_.network.object; }
  /// The run stopped for another reason than this stage's stopping criteria
  /// (a callback, a signal): later stages must not start.
  bool ended_by_request() const { return stop_requested() && !criterion_stop_; }
  /// A stop signal (on this rank or another) ended the run; it is resumable.
  bool stopped_by_signal() const { return signal_stop_; }

  // For a step replacement (train/captured_train_step.h): the parts of the
  // default train step around the forward, loss and backward.
  /// The network in training mode (frozen parts in eval), the update's batch begun.
  void begin_train_step();
  /// Ends the update (Updater::finish) and tells the hooks when it stepped.
  void finish_update();

  // Loop (what callbacks and overrides see)
  const Context& context() const override { return context_; }
  Network& network() override { return *c_.network.object; }
  torch::optim::Optimizer& optimizer() override { return *c_.optimizer; }
  const Dataset& train_dataset() const override { return *c_.train_data.object; }
  const Dataset& test_dataset() const override {
    if (!c_.test_data.object) throw Error("this experiment has no dataset.test");
    return *c_.test_data.object;
  }
  int64_t epoch() const override { return at_.epoch; }
  int64_t epochs() const override { return stage_info_.first_epoch + loop_.epochs; }  ///< where this stage ends
  int64_t iteration() const override { return at_.iteration; }
  int64_t position() const override { return at_.position; }
  /// The sampler's batches per epoch; when an override replaced train_batches
  /// (its length is its own), the length of the last epoch it trained.
  int64_t iterations_per_epoch() const override {
    return custom_batches_ && last_epoch_length_ > 0 ? last_epoch_length_ : sampler_->batches_per_epoch();
  }
  int64_t batch_size() const override { return loop_.batch_per_device; }
  const MeterValues& values() const override { return values_; }
  const std::map<std::string, MeterReading>& meter_readings() const override { return readings_; }
  void log(const std::string& phase, const MeterValues& values) override {
    log_.append(phase, values, at_, stage_name());
  }
  void request_stop(const std::string& reason) override { stop(reason, StopKind::request); }
  bool stop_requested() const override { return !stop_reason_.empty(); }
  Stages& stages() override { return stages_; }

  // LoopState (what hooks see)
  LoopPosition position_state() const override { return at_; }
  const Components& components() const override { return c_; }
  const RunPaths& paths() const override { return paths_; }
  Communicator* communicator() const override { return comm_; }
  CheckpointStore& checkpoints() override { return *store_; }
  Hooks& hooks() override { return hooks_; }
  MeterValues train_meter_values() override { return meter_values_over_ranks(c_.train_meters, "train_", comm_); }
  void add_update_values(MeterValues& v) const override;
  void take_values(const MeterValues& values) override {
    take_meter_values(values, at_.epoch, at_.iteration, values_, readings_);
  }
  void mark_tested() override { tested_at_ = at_.iteration; }
  MeterValues test_pass() override;
  bool update_pending() const override { return updater_.pending(); }
  Updater& updater() override { return updater_; }
  void take_update_outcome(const UpdateOutcome& outcome) override;
  void request_checkpoint() override { checkpoint_requested_ = true; }
  bool epoch_end_checkpoint() const override { return epoch_end_checkpoint_; }
  bool epoch_improved() const override { return epoch_improved_; }
  std::optional<double> best_value() const override {
    return stopping_.progress().has_best ? std::optional(stopping_.progress().best) : std::nullopt;
  }
  const std::string& stop_reason() const override { return stop_reason_; }
  const std::string& stage_name() const override { return stage_info_.count > 1 ? stage_info_.name : no_name_; }
  const LoaderStats& train_loader_stats() const override { return *train_stats_; }

 private:
  enum class StopKind { request, criterion, signal };

  bool default_should_continue();
  void default_epoch(int64_t epoch);
  BatchStream default_train_batches(int64_t epoch);
  StepResult default_train_step(const Batch& batch);
  MeterValues default_test();
  void default_checkpoint();
  /// Every checkpoint written whole (the store may write on a thread of its
  /// own), a failed write thrown, on every rank.
  void finish_checkpoint_writes();

  /// The epoch's data ran out (or a stop came): its values, test, verdict, hooks and checkpoint.
  void end_epoch();
  LoaderOptions loader_options(const Built<Dataset>& data, int64_t batch_size) const {
    return make_loader_options(loop_, seed_, *c_.network.config, data, batch_size, context_);
  }
  UpdateClock clock() const {
    return {at_, stage_info_.first_epoch, stage_info_.first_iteration, sampler_->batches_per_epoch()};
  }
  LoopProgress progress() const { return {at_, stage_info_, stopping_.progress(), values_, updater_.scaler()}; }
  void stop(const std::string& reason, StopKind kind);
  /// A stop signal arrived: stop at this boundary (with a checkpoint).
  void poll_stop_signal();

  LoopConfig loop_;  ///< the stage's `loop:` section
  Components c_;
  Context context_;
  RunPaths paths_;
  std::unique_ptr<Sampler> sampler_;  ///< the training set's order: make_sampler()
  uint64_t seed_;                     ///< the experiment's: the sampler's and the samples' augmentation
  Stages stages_;
  Updater updater_;
  Hooks hooks_;
  StoppingRule stopping_;
  RunLog log_;
  std::shared_ptr<CheckpointStore> store_;
  Evaluator evaluator_;
  RankAgreement ranks_{nullptr};
  size_t bucket_bytes_;                     ///< distributed.bucket_mb
  nlohmann::ordered_json config_resolved_;  ///< the resolved experiment, for checkpoint manifests
  std::string config_hash_;                 ///< ... and its SHA-256

  LoopPosition at_;
  StageInfo stage_info_;
  MeterValues values_;
  std::map<std::string, MeterReading> readings_;  ///< when each meter value was computed
  std::string stop_reason_;
  bool criterion_stop_ = false;  ///< the first stop came from `stopping:` (ends the stage only)
  bool signal_stop_ = false;     ///< a stop signal came, here or on another rank: the run ends resumable
  std::function<int()> stop_signal_;
  int64_t tested_at_ = -1;  ///< iteration of the last periodic test
  bool epoch_improved_ = false, epoch_end_checkpoint_ = false, checkpoint_requested_ = false;
  bool custom_batches_ = false;    ///< an override replaced train_batches
  int64_t last_epoch_length_ = 0;  ///< train batches of the last completed epoch
  Communicator* comm_ = nullptr;
  std::shared_ptr<GradientReducer> reducer_;
  std::shared_ptr<LoaderStats> train_stats_ = std::make_shared<LoaderStats>();
  /// The fields of the training batch handed out last (SDK 1.5): train_step and the train meters read them.
  std::shared_ptr<FieldsBeside> train_fields_ = std::make_shared<FieldsBeside>();
  const std::string no_name_;
};

}  // namespace trainyard::host
