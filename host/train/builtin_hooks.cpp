#include "train/builtin_hooks.h"

#include <chrono>

#include "distributed/communicator.h"
#include "train/checkpoint_store.h"
#include "train/hooks.h"
#include "train/loader_settings.h"
#include "train/meter_results.h"
#include "train/run_log.h"
#include "util/clock.h"

namespace trainyard::host {
namespace {

using Clock = std::chrono::steady_clock;

class TestMeterResults final : public HostHook {
 public:
  std::string name() const override { return "test meter results"; }
  void after_test(LoopState& t, const MeterValues&) override {
    const LoopPosition at = t.position_state();
    write_meter_results(t.components().test_meters, t.paths().run_dir, at.epoch, at.position, at.iteration,
                        t.communicator(), t.writes_files());
  }
};

// The best epoch stays, whatever the rotation of checkpoints deletes. Kept
// once the epoch's checkpoint is written, which is after the epoch's
// after_epoch callbacks.
class KeepBestCheckpoint final : public HostHook {
 public:
  explicit KeepBestCheckpoint(double stall_timeout_secs) : stall_timeout_secs_(stall_timeout_secs) {}
  std::string name() const override { return "keep best checkpoint"; }
  void after_checkpoint(LoopState& t, const std::string&) override {
    if (!t.epoch_end_checkpoint() || !t.epoch_improved()) return;
    const LoopPosition at = t.position_state();
    on_rank0(t.communicator(), t.context().rank, "copy of the best checkpoint", stall_timeout_secs_,
             [&] { t.checkpoints().keep_as_best(at); });
  }

 private:
  double stall_timeout_secs_;
};

// The update's checks kept on the device (loop.update_checks_every) read
// and acted on where their values are needed: before the train log line
// shows the gradient norm, before the epoch's train line, and before a
// checkpoint (a halted run checkpoints its last good state, and stops).
class UpdateCheckReads final : public HostHook {
 public:
  explicit UpdateCheckReads(int64_t log_every) : log_every_(log_every) {}
  std::string name() const override { return "update check reads"; }
  void after_train_iter(LoopState& t, const StepResult&) override {
    if (t.iteration() % log_every_ == 0) read(t);
  }
  void epoch_trained(LoopState& t, MeterValues&) override { read(t); }
  void before_checkpoint(LoopState& t) override { read(t); }

 private:
  static void read(LoopState& t) { t.take_update_outcome(t.updater().read_checks()); }
  int64_t log_every_;
};

// A checkpoint being written on the writer thread (checkpoint.async) is
// finished whole however the run stops; its own failure, if any, is logged
// as the store goes.
class WholeCheckpointOnError final : public HostHook {
 public:
  std::string name() const override { return "whole checkpoint on error"; }
  void on_exception(LoopState& t, const std::exception_ptr&) override { t.checkpoints().finish_quietly(); }
};

class PeriodicTrainLog final : public HostHook {
 public:
  explicit PeriodicTrainLog(int64_t every) : every_(every) {}
  std::string name() const override { return "periodic train log"; }
  void after_train_iter(LoopState& t, const StepResult&) override {
    if (t.iteration() % every_ != 0) return;
    MeterValues v = t.train_meter_values();
    t.take_values(v);
    t.add_update_values(v);
    t.log("train", v);
  }

 private:
  int64_t every_;
};

class PeriodicTest final : public HostHook {
 public:
  explicit PeriodicTest(int64_t every) : every_(every) {}
  std::string name() const override { return "periodic test"; }
  void after_train_iter(LoopState& t, const StepResult&) override {
    if (every_ <= 0 || t.iteration() % every_ != 0) return;
    t.take_values(t.stages().test());
    t.mark_tested();
  }

 private:
  int64_t every_;
};

class PeriodicCheckpoint final : public HostHook {
 public:
  explicit PeriodicCheckpoint(int64_t every) : every_(every) {}
  std::string name() const override { return "periodic checkpoint"; }
  void after_train_iter(LoopState& t, const StepResult&) override {
    if (every_ > 0 && t.iteration() % every_ == 0) t.stages().checkpoint();
  }

 private:
  int64_t every_;
};

// Every T seconds of wall time, between updates; rank 0's clock decides (the
// loop's rank agreement makes every rank checkpoint at the same batch).
class TimedCheckpoint final : public HostHook {
 public:
  explicit TimedCheckpoint(double every_secs) : every_secs_(every_secs) {}
  std::string name() const override { return "timed checkpoint"; }
  void before_fetch(LoopState& t) override {
    if (t.context().rank == 0 && !t.update_pending() && seconds_since(last_) >= every_secs_) t.request_checkpoint();
  }
  void before_checkpoint(LoopState&) override { last_ = Clock::now(); }

 private:
  double every_secs_;
  Clock::time_point last_ = Clock::now();
};

// The epoch's training time (fetch, step and meters; not the periodic tests
// and checkpoints of after_train_iter), its share spent waiting for input
// (goal: a few percent) and, over ranks, in communication.
class Throughput final : public HostHook {
 public:
  std::string name() const override { return "throughput"; }
  void before_epoch(LoopState&) override { train_seconds_ = wait_seconds_ = 0, samples_ = 0; }
  void before_fetch(LoopState&) override { t0_ = Clock::now(); }
  void after_fetch(LoopState&, bool) override { wait_seconds_ += seconds_since(t0_); }
  void after_train_iter(LoopState&, const StepResult& r) override {
    train_seconds_ += seconds_since(t0_);
    samples_ += r.batch.size();
  }
  void epoch_trained(LoopState& t, MeterValues& v) override {
    Communicator* comm = t.communicator();
    const double comm_seconds = comm ? comm->take_seconds() : 0;
    double samples = static_cast<double>(samples_);
    if (comm) samples = comm->sum({samples})[0];  // over all ranks
    v["secs_per_train"] = train_seconds_;
    v["samples_per_sec"] = train_seconds_ > 0 ? samples / train_seconds_ : 0;
    v["input_wait_secs"] = wait_seconds_;
    v["input_wait_share"] = train_seconds_ > 0 ? wait_seconds_ / train_seconds_ : 0;
    if (comm) {
      v["comm_secs"] = comm_seconds;
      v["comm_share"] = train_seconds_ > 0 ? comm_seconds / train_seconds_ : 0;
    }
  }

 private:
  Clock::time_point t0_ = Clock::now();
  double train_seconds_ = 0, wait_seconds_ = 0;
  int64_t samples_ = 0;
};

// A dataset with skip_bad_records reports the epoch's skipped records once
// (each rank its own shard's) and keeps their count as a value.
class BadRecords final : public HostHook {
 public:
  std::string name() const override { return "bad records"; }
  void epoch_trained(LoopState& t, MeterValues& v) override {
    const Built<Dataset>& data = t.components().train_data;
    if (!data.config->skip_bad_records) return;
    v["train_bad_records"] = static_cast<double>(t.train_loader_stats().bad_records.load());
    t.take_values({{"train_bad_records", v["train_bad_records"]}});
    report_bad_records(*data.config, t.train_loader_stats(), "epoch " + std::to_string(t.epoch()));
  }
};

// summary.json when the run ends (rank 0). A run that had nothing left to do
// keeps the summary of the run that did it. wall_s counts from when this
// process began on the run: an earlier stage's start carries over.
class RunSummaryHook final : public HostHook {
 public:
  explicit RunSummaryHook(const BuiltinHookSettings& s) : experiment_(s.experiment), monitor_(s.monitor) {}
  std::string name() const override { return "run summary"; }
  void continue_stage(LoopState&, LoopState& previous) override {
    if (const auto* earlier = previous.hooks().find<RunSummaryHook>()) started_ = earlier->started_;
  }
  void before_run(LoopState& t) override { start_iteration_ = t.iteration(); }
  void epoch_trained(LoopState&, MeterValues& v) override {
    samples_per_sec_ = v["samples_per_sec"];
    secs_per_train_ = v["secs_per_train"];
  }
  void after_run(LoopState& t) override {
    if (!t.writes_files()) return;
    RunLog log(t.paths(), t.context().rank);
    if (t.iteration() == start_iteration_ && log.has_summary()) return;
    RunSummary summary;
    summary.experiment = experiment_;
    summary.epochs_completed = t.epoch();
    summary.iteration = t.iteration();
    summary.stage = t.stage_name();
    summary.metrics = t.values();
    summary.samples_per_sec = samples_per_sec_;
    summary.secs_per_train = secs_per_train_;
    summary.wall_s = seconds_since(started_);
    summary.stopped = t.stop_reason();
    if (const auto best = t.best_value()) summary.best = std::make_pair(monitor_, *best);
    summary.checkpoint_blocked_s = t.checkpoints().blocked_stats();  // the writes are done (EpochLoop's run)
    summary.checkpoint_write_s = t.checkpoints().write_stats();
    log.write_summary(summary);
  }

 private:
  std::string experiment_, monitor_;
  Clock::time_point started_ = Clock::now();
  int64_t start_iteration_ = 0;
  double samples_per_sec_ = 0, secs_per_train_ = 0;
};

}  // namespace

void add_builtin_hooks(Hooks& hooks, const BuiltinHookSettings& s) {
  hooks.add(std::make_shared<UpdateCheckReads>(s.log_every_iters), priority::highest);
  hooks.add(std::make_shared<WholeCheckpointOnError>(), priority::highest);
  hooks.add(std::make_shared<Throughput>(), priority::highest);
  hooks.add(std::make_shared<BadRecords>(), priority::highest);
  if (s.checkpoint_every_secs > 0)
    hooks.add(std::make_shared<TimedCheckpoint>(s.checkpoint_every_secs), priority::highest);
  hooks.add(std::make_shared<TestMeterResults>(), priority::high);
  if (s.keep_best) hooks.add(std::make_shared<KeepBestCheckpoint>(s.stall_timeout_secs), priority::high);
  hooks.add(std::make_shared<PeriodicTrainLog>(s.log_every_iters), priority::below_normal);
  hooks.add(std::make_shared<PeriodicTest>(s.test_every_iters), priority::low);
  hooks.add(std::make_shared<PeriodicCheckpoint>(s.checkpoint_every_iters), priority::very_low);
  hooks.add(std::make_shared<RunSummaryHook>(s), priority::lowest);
}

}  // namespace trainyard::host
