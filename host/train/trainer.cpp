#include "train/trainer.h"

#include "train/meter_results.h"

#include <cmath>
#include <ctime>
#include <filesystem>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/optim/optimizer.h>

#include "config/snapshot.h"
#include "distributed/communicator.h"
#include "distributed/gradient_reducer.h"
#include "log/log.h"
#include "train/guard.h"
#include "train/nonfinite.h"
#include "train/precision.h"
#include "train/profiler.h"
#include "train/schedule.h"
#include "train/weight_average.h"
#include "util/json.h"
#include "util/process.h"
#include "util/text.h"
#include "util/watchdog.h"

namespace trainyard::host {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Trainer::Trainer(const Experiment& experiment, Components components, Context context, RunPaths paths,
                 std::shared_ptr<CheckpointStore> store)
    : e_(experiment),
      c_(std::move(components)),
      context_(std::move(context)),
      paths_(std::move(paths)),
      updater_(e_, c_, context_),
      stopping_(e_.stopping, [this](const std::string& key) { return e_.where("stopping." + key); }),
      log_(paths_, context_.rank),
      store_(store ? std::move(store)
                   : std::make_shared<CheckpointStore>(paths_.checkpoints, e_.output.keep_checkpoints)) {
  sampler_ = make_sampler(e_, c_.train_data, context_);
  config_resolved_ = e_.resolved();
  config_hash_ = resolved_sha256(config_resolved_);
  stages_.run = [this] { default_run(); };
  stages_.should_continue = [this] { return default_should_continue(); };
  stages_.epoch = [this](int64_t epoch) { default_epoch(epoch); };
  stages_.train_batches = [this](int64_t epoch) { return default_train_batches(epoch); };
  stages_.train_step = [this](const Batch& batch) { return default_train_step(batch); };
  stages_.test = [this] { return default_test(); };
  stages_.checkpoint = [this] { default_checkpoint(); };
  stages_.schedule = [this](int64_t step, int64_t total) {
    return schedule_factor(e_.schedule, step, total, updater_.base_lr());
  };
  for (const auto& cb : c_.callbacks) hooks_.add(callback_hook(cb), cb.config->priority);
}

void Trainer::set_communicator(Communicator* comm) {
  comm_ = comm;
  if (comm_)
    reducer_ = std::make_shared<GradientReducer>(*comm_, c_.network.object->parameters(),
                                                 static_cast<size_t>(e_.distributed.bucket_mb) << 20);
  updater_.set_reducer(reducer_.get());
}

UpdateClock Trainer::clock() const {
  return {at_, stage_.first_epoch, stage_.first_iteration, sampler_->batches_per_epoch()};
}

const Dataset& Trainer::test_dataset() const {
  if (!c_.test_data.object) throw Error("this experiment has no dataset.test");
  return *c_.test_data.object;
}

void Trainer::resume(const std::string& checkpoint, Verify verify) {
  std::vector<CheckpointPart*> parts;
  if (ema_) parts.push_back(ema_.get());
  CheckpointState state = store_->load(checkpoint, *c_.network.object, *c_.optimizer, verify, parts);
  if (ema_ && state.parts_found.empty())
    log_warning("warning: " + checkpoint +
                ": the checkpoint has no averaged weights (ema); the average starts from "
                "its weights");
  if (state.stage != stage_.index)
    throw Error(checkpoint + ": checkpoint of stage " + std::to_string(state.stage + 1) + ", not of stage " +
                std::to_string(stage_.index + 1));
  stage_.first_iteration = state.stage_first_iteration;
  // A stage starts where the one before it ended, which is earlier than the
  // sum of their epochs when that one stopped on a `stopping:` criterion.
  if (state.stage_first_epoch >= 0) stage_.first_epoch = state.stage_first_epoch;
  at_ = state.at;
  stopping_.progress() = {state.best, state.has_best, state.epochs_without_improvement};
  values_ = state.values;
  if (LossScaler& scaler = updater_.scaler(); scaler.enabled && state.loss_scale > 0) {
    scaler.scale = state.loss_scale;
    scaler.finite_in_a_row = state.loss_scale_finite_in_a_row;
    scaler.skipped = state.loss_scale_skipped;
  }
  // A stage that had reached its target at this checkpoint's epoch stays
  // stopped, as the uninterrupted run did (a multi-stage run goes on with the
  // next stage from these weights).
  if (at_.position == 0 && at_.epoch > stage_.first_epoch) {
    if (auto reached = stopping_.target_reached(values_); reached && !reached->empty()) {
      criterion_stop_ = true;
      request_stop(*reached + " (at the checkpoint)");
    }
  }
  // Events logged after this checkpoint happened in a future that is being replayed.
  log_.forget_after(at_.iteration);
  if (state.train_meters.size() == c_.train_meters.size())
    for (size_t i = 0; i < state.train_meters.size(); ++i) {
      // Saved as the sum over ranks: rank 0 carries it, the others restart from zero.
      auto acc = context_.rank == 0 ? state.train_meters[i] : std::vector<double>(state.train_meters[i].size(), 0.0);
      guarded(*c_.train_meters[i].config, "set_accumulators",
              [&] { c_.train_meters[i].object->set_accumulators(acc); });
    }
}

void Trainer::continue_from(Trainer& previous) {
  at_ = previous.at_;
  stage_.first_iteration = at_.iteration;
  // This stage trains its own loop.epochs from here, also when the previous
  // stage ended early on its stopping criterion.
  stage_.first_epoch = at_.epoch;
  values_ = previous.values_;
  readings_ = previous.readings_;
  started_ = previous.started_;  // wall_s covers every stage this process trained
  // fp16 stages share one loss scale
  if (updater_.scaler().enabled && previous.updater_.scaler().enabled) updater_.scaler() = previous.updater_.scaler();
  if (stopping_.watches_like(previous.stopping_)) {
    stopping_.progress().best = previous.stopping_.progress().best;
    stopping_.progress().has_best = previous.stopping_.progress().has_best;
  }
  at::NoGradGuard no_grad;
  if (ema_ && previous.ema_) ema_->continue_from(*previous.ema_, previous.network());
  auto from = previous.network().named_parameters();
  for (auto& p : c_.network.object->named_parameters()) p.value().copy_(from[p.key()]);
  auto from_buffers = previous.network().named_buffers();
  for (auto& b : c_.network.object->named_buffers()) b.value().copy_(from_buffers[b.key()]);
}

void Trainer::install_overrides() {
  // Each override's replacement runs under its name, so a failure inside it
  // (but not inside a default it calls) is reported against it.
  for (auto& o : c_.overrides) {
    guarded(*o.config, "install", [&] { o.object->install(stages_, *this); });
    const ComponentConfig& who = *o.config;
    for (const auto& stage : o.object->replaces()) {
      if (stage == "train_batches") custom_batches_ = true;
      // One wrapper for every stage, from the SDK's stage table (TRAINYARD_STAGES).
      stages_.for_each([&](const char* name, auto& slot) {
        if (stage != name) return;
        slot = [f = slot, &who, action = "stage " + stage](auto&&... args) {
          return guarded(who, action.c_str(), [&] { return f(args...); });
        };
      });
    }
  }
}

void Trainer::run() {
  // The watchdog's stack traces go to the run directory (the finder's and
  // eval's trainers have none: the temporary folder).
  const std::string traces_dir =
      paths_.run_dir.empty() ? std::filesystem::temp_directory_path().string() : paths_.run_dir;
  StallWatchdog watchdog(
      {e_.loop.stall_timeout_secs, e_.loop.stop_grace_secs,
       (std::filesystem::path(traces_dir) / ("stall-rank" + std::to_string(context_.rank) + ".txt")).string()});
  install_overrides();
  const int64_t start_iteration = at_.iteration;
  stages_.run();
  // A run that had nothing left to do keeps the summary of the run that did it.
  if (writes_files() && (at_.iteration != start_iteration || !log_.has_summary()))
    write_summary(seconds_since(started_));
}

void Trainer::default_run() {
  hooks_.each([&](HostHook& h) { h.before_run(*this); });
  while (stages_.should_continue()) stages_.epoch(at_.epoch);
  hooks_.each([&](HostHook& h) { h.after_run(*this); });
}

void Trainer::mark_progress() const {
  WatchedProgress& p = watched_progress();
  p.epoch.store(at_.epoch, std::memory_order_relaxed);
  p.iteration.store(at_.iteration, std::memory_order_relaxed);
  heartbeat();
}

void Trainer::check_stop_signal() {
  if (const int signo = stop_signal_received(); signo != 0 && !signal_stop_) {
    signal_stop_ = true;
    request_stop(signal_name(signo) + " at iteration " + std::to_string(at_.iteration));
  }
}

bool Trainer::default_should_continue() {
  check_stop_signal();
  if (comm_) {
    // A signal that arrived during the last epoch's test or checkpoint on one
    // rank stops them all here, at the same epoch boundary.
    auto flags = comm_->sum({stop_requested() ? 1.0 : 0.0, signal_stop_ ? 1.0 : 0.0});
    if (flags[1] > 0) signal_stop_ = true;
    if (flags[0] > 0 && !stop_requested()) request_stop("requested by another rank");
  }
  // An early stop holds across runs: a resumed run that had stopped stays stopped.
  return at_.epoch < epochs() && !stop_requested() && !stopping_.out_of_patience();
}

BatchStream Trainer::default_train_batches(int64_t epoch) {
  BatchStream inner = guarded(*c_.train_data.config, "get_batch", [&] {
    sampler_->restore({epoch, at_.position, e_.seed});  // the loop's position is the sampler's state
    return batch_stream(*c_.train_data.object, *sampler_,
                        make_loader_options(e_, c_.train_data, sampler_->batch_size(), context_), train_stats_);
  });
  const ComponentConfig& who = *c_.train_data.config;
  return [inner, &who] { return guarded(who, "get_batch", inner); };
}

at::Tensor Trainer::forward(const Batch& batch) {
  return forward_in_precision(context_.device.type(), e_.loop.effective_precision(), [&] {
    return guarded(*c_.network.config, "forward", [&] { return c_.network.object->forward(batch); });
  });
}

StepResult Trainer::default_train_step(const Batch& batch) {
  c_.network.object->train();
  for (auto& m : c_.frozen) m->eval();  // frozen batch norm keeps its statistics
  updater_.begin_batch();
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

void Trainer::finish_update() {
  const UpdateOutcome outcome = [&] {
    RECORD_USER_SCOPE(trace_scope::optimizer);  // gradients averaged and clipped, the step
    return updater_.finish(clock(), stages_.schedule);
  }();
  if (outcome.loss_scale) values_["loss_scale"] = *outcome.loss_scale;
  if (outcome.scaler_skipped_updates) values_["scaler_skipped_updates"] = *outcome.scaler_skipped_updates;
  if (outcome.skipped_updates) values_["skipped_updates"] = *outcome.skipped_updates;
  if (!outcome.stop.empty()) {
    stages_.checkpoint();  // the last good update's weights, at this batch
    throw NonFiniteStop(outcome.stop);
  }
  if (outcome.stepped) hooks_.each([&](HostHook& h) { h.after_update(*this, outcome); });
}

void Trainer::empty_step() {
  updater_.backward_nothing([&] {
    if (!context_.sync_batch_norm) return;
    // Synchronized batch norm layers make collectives in forward and backward:
    // run them on an empty batch (contributing zero samples).
    std::vector<int64_t> shape{0};
    shape.insert(shape.end(), context_.dataset.sample_shape.begin(), context_.dataset.sample_shape.end());
    Batch empty{at::zeros(shape, at::kFloat).to(context_.device), at::zeros({0}, at::kLong).to(context_.device), {}};
    at::Tensor output = forward(empty);  // in the run's precision, as the other ranks' forward
    guarded(*c_.network.config, "backward", [&] { (output.sum() * 0).backward(); });
  });
  if (updater_.due()) finish_update();  // steps with the other ranks' gradients
}

MeterValues Trainer::meter_values(const std::vector<Built<Meter>>& meters, const std::string& prefix) {
  MeterValues out;
  for (const auto& m : meters) {
    // Over ranks: the summed accumulators (and gathered rows) give the exact value over all shards.
    std::map<std::string, double> values;
    with_all_ranks_state(m, comm_, [&] { values = guarded(*m.config, "values", [&] { return m.object->values(); }); });
    for (const auto& [k, v] : values) out[prefix + k] = v;
  }
  return out;
}

void Trainer::default_epoch(int64_t epoch) {
  hooks_.each([&](HostHook& h) { h.before_epoch(*this); });
  if (at_.position == 0) {
    for (auto& m : c_.train_meters) guarded(*m.config, "reset", [&] { m.object->reset(); });
    train_stats_->reset();  // counted per epoch
  }

  BatchStream batches = stages_.train_batches(epoch);
  double train_seconds = 0, wait_seconds = 0;
  int64_t train_samples = 0;
  while (true) {
    mark_progress();
    check_stop_signal();
    // A stop waits for the end of an accumulation (iter_size), so that no
    // update is cut short and a resumed run continues exactly.
    if (!comm_ && stop_requested() && !updater_.pending()) break;
    // Checkpoint every T seconds (rank 0's clock decides), between updates.
    const bool due = e_.loop.checkpoint_every_secs > 0 && !updater_.pending() && context_.rank == 0 &&
                     seconds_since(last_checkpoint_) >= e_.loop.checkpoint_every_secs;
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<Batch> batch;
    {
      RECORD_USER_SCOPE(trace_scope::data_wait);
      batch = batches();
    }
    wait_seconds += seconds_since(t0);
    bool checkpoint_now = due;
    if (comm_) {
      // Ranks agree on every decision: whether anyone still has data, whether anyone stops, whether to checkpoint.
      RECORD_USER_SCOPE(trace_scope::ranks);
      auto flags =
          comm_->sum({batch ? 1.0 : 0.0, stop_requested() ? 1.0 : 0.0, signal_stop_ ? 1.0 : 0.0, due ? 1.0 : 0.0});
      if (flags[2] > 0) signal_stop_ = true;  // every rank exits as resumable
      if (flags[1] > 0 && !stop_requested()) request_stop("requested by another rank");
      if ((flags[1] > 0 && !updater_.pending()) || flags[0] == 0) break;
      checkpoint_now = flags[3] > 0;
    }
    if (checkpoint_now && (batch || comm_)) stages_.checkpoint();  // at this batch, before training on it
    if (comm_) {
      // Every update starts from rank 0's buffers (DDP's broadcast_buffers):
      // the statistics every rank tests with are the ones rank 0 saves.
      if (!updater_.pending()) {
        RECORD_USER_SCOPE(trace_scope::ranks);
        comm_->broadcast_buffers(*c_.network.object);
      }
      if (!batch) {
        empty_step();
        ++at_.position;
        ++at_.iteration;
        continue;
      }
    }
    if (!batch) break;
    hooks_.each([&](HostHook& h) { h.before_train_iter(*this, *batch); });
    StepResult result = stages_.train_step(*batch);
    ++at_.position;
    ++at_.iteration;
    mark_progress();  // the step is done: a hang in its after_train_iter names this iteration
    for (auto& m : c_.train_meters)
      guarded(*m.config, "update", [&] { m.object->update({result.batch, result.output, result.loss}); });
    train_seconds += seconds_since(t0);
    train_samples += batch->size();
    // The users' callbacks, then the periodic train log, test and checkpoint
    // (add_builtin_hooks()).
    hooks_.each([&](HostHook& h) { h.after_train_iter(*this, result); });
  }
  if (updater_.pending()) finish_update();  // the epoch ended inside an accumulation
  if (stop_requested()) {
    // Keep the place in the epoch so that the next run resumes here.
    stages_.checkpoint();
    return;
  }
  last_epoch_length_ = at_.position;
  ++at_.epoch;
  at_.position = 0;
  secs_per_train_ = train_seconds;
  const double comm_seconds = comm_ ? comm_->take_seconds() : 0;
  if (comm_) train_samples = static_cast<int64_t>(comm_->sum({double(train_samples)})[0]);  // over all ranks
  samples_per_sec_ = train_seconds > 0 ? static_cast<double>(train_samples) / train_seconds : 0;
  MeterValues v = meter_values(c_.train_meters, "train_");
  take_meter_values(v, at_.epoch, at_.iteration, values_, readings_);
  v["secs_per_train"] = secs_per_train_;
  v["samples_per_sec"] = samples_per_sec_;
  // The share of the epoch spent waiting for input (goal: a few percent).
  v["input_wait_secs"] = wait_seconds;
  v["input_wait_share"] = train_seconds > 0 ? wait_seconds / train_seconds : 0;
  if (comm_) {
    v["comm_secs"] = comm_seconds;
    v["comm_share"] = train_seconds > 0 ? comm_seconds / train_seconds : 0;
  }
  if (c_.train_data.config->skip_bad_records) {
    values_["train_bad_records"] = static_cast<double>(train_stats_->bad_records.load());
    v["train_bad_records"] = values_["train_bad_records"];
    report_bad_records(*c_.train_data.config, *train_stats_, "epoch " + std::to_string(at_.epoch));
  }
  add_update_values(v);
  log("train", v);
  if (tested_at_ != at_.iteration)  // the periodic test may have just run on this state
    take_meter_values(stages_.test(), at_.epoch, at_.iteration, values_, readings_);
  epoch_improved_ = judge_epoch();
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

MeterValues Trainer::default_test() {
  if (!c_.test_data.object) return {};
  hooks_.each([&](HostHook& h) { h.before_test(*this); });
  MeterValues v = test_pass();
  if (ema_ && ema_->config().evaluate) {
    // The same pass on the averaged weights; its values tagged test_ema_*.
    // The meters then hold the trained weights' pass again: their result
    // files (after_test) are the trained weights'.
    std::vector<MeterState> trained;
    for (const auto& m : c_.test_meters) trained.push_back(meter_state(m));
    MeterValues averaged;
    {
      const WeightAverage::Swap swap = ema_->swapped_into(*c_.network.object);
      averaged = test_pass();
    }
    for (size_t i = 0; i < c_.test_meters.size(); ++i) set_meter_state(c_.test_meters[i], trained[i]);
    for (const auto& [name, value] : averaged) v["test_ema_" + name.substr(std::string("test_").size())] = value;
  }
  log("test", v);
  // The meters' result files, then the users' callbacks (add_builtin_hooks()).
  hooks_.each([&](HostHook& h) { h.after_test(*this, v); });
  return v;
}

MeterValues Trainer::test_pass() {
  if (!c_.test_data.object)
    throw LocatedConfigError(e_.path + ": dataset.test: the experiment has no test dataset",
                             "expected dataset.test: {plugin: ...}", "");
  for (auto& m : c_.test_meters) guarded(*m.config, "reset", [&] { m.object->reset(); });
  test_stats_->reset();  // counted per test pass
  Network& net = *c_.network.object;
  if (comm_) comm_->broadcast_buffers(net);  // every rank tests the model rank 0 saves
  net.eval();
  {
    at::NoGradGuard no_grad;
    const int64_t size = c_.test_data.object->size();
    const int64_t count = e_.loop.test_samples > 0 ? std::min(e_.loop.test_samples, size) : size;
    std::vector<int64_t> order;  // this rank's share: every world_size-th sample
    for (int64_t i = context_.rank; i < count; i += context_.world_size) order.push_back(i);
    const int64_t batch_size =
        e_.loop.test_batch_per_device > 0 ? e_.loop.test_batch_per_device : e_.loop.batch_per_device;
    // Test samples are decoded as in epoch 0: the same pass every time.
    BatchStream batches = guarded(*c_.test_data.config, "get_batch", [&] {
      return batch_stream(*c_.test_data.object, std::move(order), 0, 0,
                          make_loader_options(e_, c_.test_data, batch_size, context_), test_stats_);
    });
    const int64_t total =
        (static_cast<int64_t>(count - context_.rank + context_.world_size - 1) / context_.world_size + batch_size - 1) /
        batch_size;
    for (int64_t done = 1;; ++done) {
      std::optional<Batch> batch = guarded(*c_.test_data.config, "get_batch", batches);
      if (!batch) break;
      at::Tensor output = forward(*batch);
      at::Tensor loss = guarded(*c_.loss.config, "compute", [&] { return c_.loss.object->compute(output, *batch); });
      for (auto& m : c_.test_meters) guarded(*m.config, "update", [&] { m.object->update({*batch, output, loss}); });
      hooks_.each([&](HostHook& h) { h.after_test_batch(*this, done, total); });
    }
  }
  net.train();
  MeterValues v = meter_values(c_.test_meters, "test_");
  if (c_.test_data.config->skip_bad_records) {
    v["test_bad_records"] = static_cast<double>(test_stats_->bad_records.load());
    report_bad_records(*c_.test_data.config, *test_stats_, "the test pass");
  }
  return v;
}

void Trainer::default_checkpoint() {
  hooks_.each([&](HostHook& h) { h.before_checkpoint(*this); });
  CheckpointState state;
  state.at = at_;
  state.best = stopping_.progress().best;
  state.has_best = stopping_.progress().has_best;
  state.epochs_without_improvement = stopping_.progress().epochs_without_improvement;
  state.stage = stage_.index;
  state.stage_first_iteration = stage_.first_iteration;
  state.stage_first_epoch = stage_.first_epoch;
  state.values = values_;
  if (const LossScaler& scaler = updater_.scaler(); scaler.enabled) {
    state.loss_scale = scaler.scale;
    state.loss_scale_finite_in_a_row = scaler.finite_in_a_row;
    state.loss_scale_skipped = scaler.skipped;
  }
  for (const auto& m : c_.train_meters) {
    auto local = guarded(*m.config, "accumulators", [&] { return m.object->accumulators(); });
    state.train_meters.push_back(comm_ ? comm_->sum(local) : local);  // the sum over ranks
  }
  state.config_hash = config_hash_;
  state.config = config_resolved_;
  const std::string path = store_->path_of(at_);
  last_checkpoint_ = std::chrono::steady_clock::now();
  // The ranks hold the same weights: rank 0 writes them while the others wait
  // as long as a stalled write would be tolerated, not the collective timeout.
  auto save = [&] {
    std::vector<const CheckpointPart*> parts;
    if (ema_) parts.push_back(ema_.get());
    if (writes_files()) store_->save(*c_.network.object, *c_.optimizer, state, parts);
  };
  if (comm_)
    comm_->rank0_work("checkpoint write", rank0_io_limit(e_.loop.stall_timeout_secs), save);
  else
    save();
  hooks_.each([&](HostHook& h) { h.after_checkpoint(*this, path); });
}

void Trainer::add_update_values(MeterValues& v) const {
  v["lr"] = updater_.lr();
  v["grad_norm"] = updater_.grad_norm();
  // The fp16 scaler's state and the updates skipped, where the run has them
  // (finish_update() keeps them in values_): series in metrics.jsonl.
  for (const char* name : {"loss_scale", "scaler_skipped_updates", "skipped_updates"})
    if (const auto it = values_.find(name); it != values_.end()) v[name] = it->second;
}

void Trainer::take_values(const MeterValues& values) {
  take_meter_values(values, at_.epoch, at_.iteration, values_, readings_);
}

bool Trainer::judge_epoch() {
  const StoppingRule::Verdict verdict = stopping_.judge_epoch(values_);
  for (const auto& reason : verdict.stops) {
    criterion_stop_ = criterion_stop_ || stop_reason_.empty();
    request_stop(reason);
  }
  return verdict.improved;
}

void Trainer::log(const std::string& phase, const MeterValues& values) {
  MetricsEvent event;
  event.phase = phase;
  // The epoch an event belongs to, counted from 1; events after an epoch's
  // last iteration (its test pass) carry that epoch's number.
  event.epoch = at_.position == 0 ? at_.epoch : at_.epoch + 1;
  event.iteration = at_.iteration;
  if (stage_.count > 1) event.stage = stage_.name;
  event.time = static_cast<double>(std::time(nullptr));
  event.values = values;
  log_.append(event);
}

void Trainer::request_stop(const std::string& reason) {
  if (stop_reason_.empty()) {
    stop_reason_ = reason.empty() ? "requested" : reason;
    context_.log("stopping: " + stop_reason_);
  }
}

void Trainer::write_summary(double wall_s) {
  RunSummary summary;
  summary.experiment = e_.name;
  summary.epochs_completed = at_.epoch;
  summary.iteration = at_.iteration;
  if (stage_.count > 1) summary.stage = stage_.name;
  summary.metrics = values_;
  summary.samples_per_sec = samples_per_sec_;
  summary.secs_per_train = secs_per_train_;
  summary.wall_s = wall_s;
  summary.stopped = stop_reason_;
  if (stopping_.progress().has_best) summary.best = std::make_pair(e_.stopping.monitor, stopping_.progress().best);
  log_.write_summary(summary);
}

}  // namespace trainyard::host
