#include "train/epoch_loop.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/optim/optimizer.h>

#include "config/snapshot.h"
#include "distributed/communicator.h"
#include "distributed/gradient_reducer.h"
#include "train/detections.h"
#include "train/guard.h"
#include "train/nonfinite.h"
#include "train/output_fit.h"
#include "train/overrides.h"
#include "train/profiler.h"
#include "train/schedule.h"
#include "util/process.h"

namespace trainyard::host {

EpochLoop::EpochLoop(const Experiment& e, Components components, Context context, RunPaths paths,
                     std::shared_ptr<CheckpointStore> store)
    : loop_(e.loop),
      c_(std::move(components)),
      context_(std::move(context)),
      paths_(std::move(paths)),
      sampler_(make_sampler(e.loop, e.where("loop.classes_per_batch"), c_.train_data, context_)),
      seed_(e.seed),
      updater_(UpdateSettings::from(e.loop, e.schedule, e.loss.plugin), c_, context_),
      stopping_(e.stopping,  // errors locate its two keys in the experiment file
                [monitor = e.where("stopping.monitor"), target = e.where("stopping.target_meter")](
                    const std::string& key) { return key == "monitor" ? monitor : target; }),
      log_(paths_, context_.rank),
      store_(store ? std::move(store) : make_checkpoint_store(paths_.checkpoints, e)),
      evaluator_(
          c_, context_, e.loop.effective_precision(),
          test_pass_settings(e.loop, e.path, [this](int64_t batch) { return loader_options(c_.test_data, batch); }),
          nullptr),
      bucket_bytes_(static_cast<size_t>(e.distributed.bucket_mb) << 20),
      config_resolved_(e.resolved()),
      config_hash_(resolved_sha256(config_resolved_)) {
  stages_.run = [this] {
    hooks_.each([&](HostHook& h) { h.before_run(*this); });
    while (stages_.should_continue()) stages_.epoch(at_.epoch);
    finish_checkpoint_writes();  // the summary (after_run) counts the last write
    hooks_.each([&](HostHook& h) { h.after_run(*this); });
  };
  stages_.should_continue = [this] { return default_should_continue(); };
  stages_.epoch = [this](int64_t epoch) { default_epoch(epoch); };
  stages_.train_batches = [this](int64_t epoch) { return default_train_batches(epoch); };
  stages_.train_step = [this](const Batch& batch) { return default_train_step(batch); };
  stages_.test = [this] { return default_test(); };
  stages_.checkpoint = [this] { default_checkpoint(); };
  stages_.schedule = [this, schedule = e.schedule](int64_t step, int64_t total) {
    return schedule_factor(schedule, step, total, updater_.base_lr());
  };
  for (const auto& cb : c_.callbacks) hooks_.add(callback_hook(cb), cb.config->priority);
}

void EpochLoop::set_communicator(Communicator* comm) {
  comm_ = comm;
  ranks_ = RankAgreement(comm);
  evaluator_.set_communicator(comm);
  if (comm_) reducer_ = std::make_shared<GradientReducer>(*comm_, c_.network.object->parameters(), bucket_bytes_);
  updater_.set_reducer(reducer_.get());
}

void EpochLoop::run() {
  custom_batches_ = install_overrides(c_.overrides, stages_, *this);
  try {
    stages_.run();
  } catch (...) {
    const std::exception_ptr error = std::current_exception();
    hooks_.each([&](HostHook& h) {
      try {
        h.on_exception(*this, error);
      } catch (const std::exception& e) {
        context_.log("warning: " + h.name() + " failed while the run stopped on an error: " + e.what());
      }
    });
    throw;
  }
  finish_checkpoint_writes();  // an override's run stage
}

void EpochLoop::finish_checkpoint_writes() {
  // Every rank waits with rank 0, which writes: a failed write stops them all.
  on_rank0(comm_, context_.rank, "checkpoint write", loop_.stall_timeout_secs, [&] { store_->finish(); });
}

void EpochLoop::poll_stop_signal() {
  if (const int signo = stop_signal_ ? stop_signal_() : 0; signo != 0 && !signal_stop_)
    stop(signal_name(signo) + " at iteration " + std::to_string(at_.iteration), StopKind::signal);
}

bool EpochLoop::default_should_continue() {
  poll_stop_signal();
  // A signal that arrived during the last epoch's test or checkpoint on one
  // rank stops them all here, at the same epoch boundary.
  const Votes agreed = ranks_.before_epoch({true, stop_requested(), signal_stop_, false});
  signal_stop_ = signal_stop_ || agreed.signal;
  if (agreed.stop && !stop_requested()) request_stop("requested by another rank");
  // An early stop holds across runs: a resumed run that had stopped stays stopped.
  return at_.epoch < epochs() && !stop_requested() && !stopping_.out_of_patience();
}

BatchStream EpochLoop::default_train_batches(int64_t epoch) {
  BatchStream inner = guarded(*c_.train_data.config, "get_batch", [&] {
    sampler_->restore({epoch, at_.position, seed_});  // the loop's position is the sampler's state
    LoaderOptions options = loader_options(c_.train_data, sampler_->batch_size());
    train_fields_ = options.fields_beside;
    return batch_stream(*c_.train_data.object, *sampler_, options, train_stats_);
  });
  const ComponentConfig& who = *c_.train_data.config;
  return [inner, &who] { return guarded(who, "get_batch", inner); };
}

void EpochLoop::begin_train_step() {
  c_.network.object->train();
  for (auto& m : c_.frozen) m->eval();  // frozen batch norm keeps its statistics
  updater_.begin_batch();
}

StepResult EpochLoop::default_train_step(const Batch& batch) {
  begin_train_step();
  at::Tensor output, loss;
  {
    RECORD_USER_SCOPE(trace_scope::forward);  // the network and the loss
    output = forward(batch);
    loss = checked_loss(c_, output, batch, train_fields_->of(batch), "training");
  }
  {
    RECORD_USER_SCOPE(trace_scope::backward);
    updater_.backward(loss, batch, output, clock());
  }
  if (updater_.due()) finish_update();
  return {batch, output.detach(), loss.detach()};
}

void EpochLoop::finish_update() {
  const UpdateOutcome outcome = [&] {
    RECORD_USER_SCOPE(trace_scope::optimizer);  // gradients averaged and clipped, the step
    return updater_.finish(clock(), stages_.schedule);
  }();
  take_update_outcome(outcome);
  if (outcome.stepped) hooks_.each([&](HostHook& h) { h.after_update(*this, outcome); });
}

void EpochLoop::take_update_outcome(const UpdateOutcome& outcome) {
  if (outcome.checks_read) hooks_.each([&](HostHook& h) { h.after_update_checks(*this, outcome); });
  if (outcome.loss_scale) values_["loss_scale"] = *outcome.loss_scale;
  if (outcome.scaler_skipped_updates) values_["scaler_skipped_updates"] = *outcome.scaler_skipped_updates;
  if (outcome.skipped_updates) values_["skipped_updates"] = *outcome.skipped_updates;
  if (!outcome.stop.empty()) {
    stages_.checkpoint();  // the last good update's weights, at this batch
    throw NonFiniteStop(outcome.stop);
  }
}

void EpochLoop::default_epoch(int64_t epoch) {
  hooks_.each([&](HostHook& h) { h.before_epoch(*this); });
  if (at_.position == 0) {
    for (auto& m : c_.train_meters) guarded(*m.config, "reset", [&] { m.object->reset(); });
    train_stats_->reset();  // counted per epoch
  }
  BatchStream batches = stages_.train_batches(epoch);
  while (true) {
    poll_stop_signal();
    hooks_.each([&](HostHook& h) { h.before_fetch(*this); });
    // A stop waits for the end of an accumulation (iter_size), so that no
    // update is cut short and a resumed run continues exactly.
    if (!ranks_.spans_ranks() && stop_requested() && !updater_.pending()) break;
    std::optional<Batch> batch;
    {
      RECORD_USER_SCOPE(trace_scope::data_wait);
      batch = batches();
    }
    hooks_.each([&](HostHook& h) { h.after_fetch(*this, batch.has_value()); });
    const Votes agreed = ranks_.before_step({batch.has_value(), stop_requested(), signal_stop_, checkpoint_requested_});
    checkpoint_requested_ = false;
    signal_stop_ = signal_stop_ || agreed.signal;  // every rank exits as resumable
    if (agreed.stop && !stop_requested()) request_stop("requested by another rank");
    if ((ranks_.spans_ranks() && agreed.stop && !updater_.pending()) || !agreed.has_batch) break;
    if (agreed.checkpoint) stages_.checkpoint();  // at this batch, before training on it
    if (ranks_.spans_ranks()) {
      // Every update starts from rank 0's buffers (DDP's broadcast_buffers):
      // the statistics every rank tests with are the ones rank 0 saves.
      if (!updater_.pending()) {
        RECORD_USER_SCOPE(trace_scope::ranks);
        comm_->broadcast_buffers(*c_.network.object);
      }
      if (!batch) {  // this rank's shard ran out before another's
        updater_.backward_nothing([&](const Batch& empty) { return forward(empty); });
        if (updater_.due()) finish_update();  // steps with the other ranks' gradients
        ++at_.position, ++at_.iteration;
        continue;
      }
    }
    hooks_.each([&](HostHook& h) { h.before_train_iter(*this, *batch); });
    StepResult result = stages_.train_step(*batch);
    ++at_.position, ++at_.iteration;
    if (!c_.train_meters.empty()) {
      const Fields measured =
          fields_for_meters(c_, c_.train_meters, result.output, result.batch, train_fields_->of(result.batch));
      for (auto& m : c_.train_meters) update_meter(m, {result.batch, result.output, result.loss}, measured);
    }
    // The users' callbacks, then the periodic train log, test and checkpoint (add_builtin_hooks()).
    hooks_.each([&](HostHook& h) { h.after_train_iter(*this, result); });
  }
  if (updater_.pending()) finish_update();            // the epoch ended inside an accumulation
  if (stop_requested()) return stages_.checkpoint();  // keeps the place in the epoch: the next run resumes here
  end_epoch();
}

void EpochLoop::end_epoch() {
  last_epoch_length_ = at_.position;
  ++at_.epoch;
  at_.position = 0;
  MeterValues line;
  hooks_.each([&](HostHook& h) { h.epoch_trained(*this, line); });  // the update's checks read, throughput, bad records
  const MeterValues meters = train_meter_values();
  take_meter_values(meters, at_.epoch, at_.iteration, values_, readings_);
  line.insert(meters.begin(), meters.end());
  add_update_values(line);
  log("train", line);
  if (tested_at_ != at_.iteration)  // the periodic test may have just run on this state
    take_meter_values(stages_.test(), at_.epoch, at_.iteration, values_, readings_);
  const StoppingRule::Verdict verdict = stopping_.judge_epoch(values_);
  for (const auto& reason : verdict.stops) stop(reason, StopKind::criterion);
  epoch_improved_ = verdict.improved;
  // The users' callbacks, then the epoch's checkpoint (MMEngine's order: its
  // CheckpointHook saves after the other hooks' after_train_epoch). The
  // checkpoint holds what they did, and one that throws leaves the previous
  // checkpoint as the latest: the resume trains to this epoch's end again and
  // calls after_epoch again, so no epoch's call is lost.
  hooks_.each([&](HostHook& h) { h.after_epoch(*this); });
  epoch_end_checkpoint_ = true;  // the best checkpoint is kept in after_checkpoint (add_builtin_hooks())
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{epoch_end_checkpoint_};
  stages_.checkpoint();
}

MeterValues EpochLoop::default_test() {
  if (!c_.test_data.object) return {};
  hooks_.each([&](HostHook& h) { h.before_test(*this); });
  MeterValues v = test_pass();
  hooks_.each([&](HostHook& h) { h.after_test_pass(*this, v); });  // ema: the same pass on the averaged weights
  log("test", v);
  // The meters' result files, then the users' callbacks (add_builtin_hooks()).
  hooks_.each([&](HostHook& h) { h.after_test(*this, v); });
  return v;
}

MeterValues EpochLoop::test_pass() {
  return evaluator_.test_pass(
      [&](int64_t done, int64_t total) { hooks_.each([&](HostHook& h) { h.after_test_batch(*this, done, total); }); });
}

void EpochLoop::add_update_values(MeterValues& v) const {
  v["lr"] = updater_.lr();
  v["grad_norm"] = updater_.grad_norm();
  // The fp16 scaler's state and the updates skipped, where the run has them
  // (finish_update() keeps them in values_): series in metrics.jsonl.
  for (const char* name : {"loss_scale", "scaler_skipped_updates", "skipped_updates"})
    if (const auto it = values_.find(name); it != values_.end()) v[name] = it->second;
}

void EpochLoop::stop(const std::string& reason, StopKind kind) {
  if (kind == StopKind::signal) signal_stop_ = true;
  if (!stop_reason_.empty()) return;
  criterion_stop_ = kind == StopKind::criterion;
  stop_reason_ = reason.empty() ? "requested" : reason;
  context_.log("stopping: " + stop_reason_);
}

}  // namespace trainyard::host
