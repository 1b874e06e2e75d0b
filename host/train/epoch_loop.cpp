#include "train/epoch_loop.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/optim/optimizer.h>

#include "config/snapshot.h"
#include "distributed/communicator.h"
#include "distributed/gradient_reducer.h"
#include "train/guard.h"
#include "train/nonfinite.h"
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
      store_(
          store ? std::move(store)
                : std::make_shared<CheckpointStore>(paths_.checkpoints, e.output.keep_checkpoints, e.checkpoint.async)),
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

void EpochLoop::resume(const std::string& checkpoint, Verify verify) {
  CheckpointState state =
      store_->load(checkpoint, *c_.network.object, *c_.optimizer, verify, hooks_.checkpoint_parts());
  if (state.stage != stage_.index)
    throw Error(checkpoint + ": checkpoint of stage " + std::to_string(state.stage + 1) + ", not of stage " +
                std::to_string(stage_.index + 1));
  LoopProgress p = progress();
  restore_checkpoint_state(state, p, c_.train_meters, context_.rank);
  at_ = p.at, stage_ = p.stage, stopping_.progress() = p.stopping, values_ = p.values, updater_.scaler() = p.scaler;
  // A stage that had reached its target at this checkpoint's epoch stays
  // stopped, as the uninterrupted run did (a multi-stage run goes on with the
  // next stage from these weights).
  if (at_.position == 0 && at_.epoch > stage_.first_epoch)
    if (auto reached = stopping_.target_reached(values_); reached && !reached->empty())
      stop(*reached + " (at the checkpoint)", StopKind::criterion);
  // Events logged after this checkpoint happened in a future that is being replayed.
  log_.forget_after(at_.iteration);
  hooks_.each([&](HostHook& h) { h.after_resume(*this, state, checkpoint); });
}

void EpochLoop::continue_from(EpochLoop& previous) {
  at_ = previous.at_;
  stage_.first_iteration = at_.iteration;
  // This stage trains its own loop.epochs from here, also when the previous
  // stage ended early on its stopping criterion.
  stage_.first_epoch = at_.epoch;
  values_ = previous.values_;
  readings_ = previous.readings_;
  // fp16 stages share one loss scale
  if (updater_.scaler().enabled && previous.updater_.scaler().enabled) updater_.scaler() = previous.updater_.scaler();
  if (stopping_.watches_like(previous.stopping_)) {
    stopping_.progress().best = previous.stopping_.progress().best;
    stopping_.progress().has_best = previous.stopping_.progress().has_best;
  }
  hooks_.each(
      [&](HostHook& h) { h.continue_stage(*this, previous); });  // before the weights: ema reads the earlier ones
  copy_weights(previous.network(), *c_.network.object);
}

void EpochLoop::run() {
  custom_batches_ = install_overrides(c_.overrides, stages_, *this);
  if (loop_.cuda_graph) start_cuda_graph();
  try {
    stages_.run();
  } catch (...) {
    // Whatever stopped the run, the checkpoint being written is finished
    // whole; its own failure, if any, is logged as the store goes.
    store_->finish_quietly();
    throw;
  }
  finish_checkpoint_writes();  // an override's run stage
}

void EpochLoop::finish_checkpoint_writes() {
  // Every rank waits with rank 0, which writes: a failed write stops them all.
  if (store_->async())
    on_rank0(comm_, context_.rank, "checkpoint write", loop_.stall_timeout_secs, [&] { store_->finish(); });
}

void EpochLoop::start_cuda_graph() {
  CudaGraphConditions run{.cuda = context_.device.is_cuda(),
                          .world_size = context_.world_size,
                          .debug = updater_.debug(),
                          .checks_on_device = updater_.checks_on_device(),
                          .fixed_sample_shape = !context_.dataset.sample_shape.empty()};
  for (const auto& o : c_.overrides)
    for (const auto& stage : o.object->replaces()) run.train_step_overridden |= stage == "train_step";
  if (const std::string why = cuda_graph_refusal(run); !why.empty())
    throw ConfigError("loop.cuda_graph: this run's step cannot be captured: " + why);
  graph_ =
      std::make_unique<CapturedStep>(context_.device, c_.network.object->parameters(), capture_warmup(profile_skip_));
}

StepTensors EpochLoop::forward_loss_backward(const Batch& batch) {
  StepTensors t;
  {
    RECORD_USER_SCOPE(trace_scope::forward);
    t.output = forward(batch);
    t.loss = guarded(*c_.loss.config, "compute", [&] { return c_.loss.object->compute(t.output, batch); });
  }
  RECORD_USER_SCOPE(trace_scope::backward);
  guarded(*c_.network.config, "backward", [&] { t.loss.backward(); });
  return t;
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
    return batch_stream(*c_.train_data.object, *sampler_, loader_options(c_.train_data, sampler_->batch_size()),
                        train_stats_);
  });
  const ComponentConfig& who = *c_.train_data.config;
  return [inner, &who] { return guarded(who, "get_batch", inner); };
}

StepResult EpochLoop::default_train_step(const Batch& batch) {
  c_.network.object->train();
  for (auto& m : c_.frozen) m->eval();  // frozen batch norm keeps its statistics
  updater_.begin_batch();
  if (graph_) {
    if (const auto t = graph_->run(batch, [this](const Batch& b) { return forward_loss_backward(b); })) {
      if (graph_->captured() && !updater_.gradients_kept()) {
        updater_.set_gradients_kept(true);
        context_.log("loop.cuda_graph: the step is captured at iteration " + std::to_string(at_.iteration + 1) +
                     "; the later ones replay it");
      }
      updater_.backward_done(t->loss);
      if (updater_.due()) finish_update();
      // Copies: the next replay overwrites the graph's own tensors, and hooks may keep these.
      return {batch, t->output.detach().clone(), t->loss.detach().clone()};
    }
    updater_.zero_gradients_in_place();  // a batch the graph does not fit: its backward adds into the graph's gradients
  }
  at::Tensor output, loss;
  {
    RECORD_USER_SCOPE(trace_scope::forward);  // the network and the loss
    output = forward(batch);
    loss = guarded(*c_.loss.config, "compute", [&] { return c_.loss.object->compute(output, batch); });
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

void EpochLoop::read_update_checks() { take_update_outcome(updater_.read_checks()); }

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
    if (at_.iteration % loop_.log_every_iters == 0) read_update_checks();  // the log line shows the norm
    for (auto& m : c_.train_meters)
      guarded(*m.config, "update", [&] { m.object->update({result.batch, result.output, result.loss}); });
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
  read_update_checks();
  MeterValues line;
  hooks_.each([&](HostHook& h) { h.epoch_trained(*this, line); });  // throughput, bad records
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

void EpochLoop::default_checkpoint() {
  read_update_checks();  // a halted run checkpoints its last good state here, and stops
  hooks_.each([&](HostHook& h) { h.before_checkpoint(*this); });
  CheckpointState state = checkpoint_state(progress(), c_.train_meters, comm_);
  state.config_hash = config_hash_;
  state.config = config_resolved_;
  const std::vector<CheckpointPart*> hook_parts = hooks_.checkpoint_parts();
  const std::vector<const CheckpointPart*> parts(hook_parts.begin(), hook_parts.end());
  // The ranks hold the same weights: rank 0 writes them.
  on_rank0(comm_, context_.rank, "checkpoint write", loop_.stall_timeout_secs,
           [&] { store_->save(*c_.network.object, *c_.optimizer, state, parts); });
  hooks_.each([&](HostHook& h) { h.after_checkpoint(*this, store_->path_of(at_)); });
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
