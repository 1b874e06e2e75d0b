#include "train/trainer.h"

#include <cmath>
#include <ctime>
#include <filesystem>

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include "config/config_file.h"
#include "distributed/communicator.h"
#include "train/precision.h"
#include "train/guard.h"
#include "train/nonfinite.h"
#include "train/schedule.h"
#include "util/process.h"
#include "util/sha256.h"
#include "util/text.h"
#include "util/files.h"
#include "util/json.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

RunPaths::RunPaths(const std::string& dir)
    : run_dir(dir),
      checkpoints((fs::path(dir) / "checkpoints").string()),
      metrics((fs::path(dir) / "metrics.jsonl").string()),
      summary((fs::path(dir) / "summary.json").string()) {}

double clip_gradients(std::vector<at::Tensor>& grads, double max_value, double max_norm) {
  at::NoGradGuard no_grad;
  if (max_value > 0)
    for (auto& g : grads) g.clamp_(-max_value, max_value);
  // One pass over each gradient (a BLAS dot product, no temporary) and one
  // read back: this runs at every update, for the non-finite check too.
  std::vector<at::Tensor> squares;
  squares.reserve(grads.size());
  for (auto& g : grads) {
    // fp32 sums even for half-precision gradients (a float16 dot overflows past 256).
    const at::Tensor flat = (g.is_contiguous() ? g.view({-1}) : g.reshape({-1})).to(at::kFloat);
    squares.push_back(at::dot(flat, flat));
  }
  const double norm = squares.empty() ? 0.0 : std::sqrt(at::stack(squares).sum(at::kDouble).item<double>());
  if (max_norm > 0 && norm > max_norm)
    for (auto& g : grads) g.mul_(max_norm / norm);
  return norm;
}

EpochPlan make_epoch_plan(const Experiment& e, int64_t dataset_size, const Context& context) {
  EpochPlan plan;
  plan.dataset_size = dataset_size;
  plan.samples_per_epoch = e.loop.train_samples_per_epoch;
  plan.batch_size = e.loop.batch_per_device;
  plan.shuffle = e.loop.shuffle;
  plan.drop_last = e.loop.drop_last;
  plan.seed = e.seed;
  plan.rank = context.rank;
  plan.world_size = context.world_size;
  return plan;
}

LoaderOptions make_loader_options(const Experiment& e, const ComponentConfig& data, int64_t batch_size,
                                  const Context& context) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.drop_last = data.key == "dataset.train" && e.loop.drop_last;
  o.threads = static_cast<int>(e.loop.decode_threads);
  o.prefetch = static_cast<int>(e.loop.prefetch_batches);
  o.seed = e.seed;
  o.skip_bad_records = data.skip_bad_records;
  o.device = context.device;
  o.channels_last = e.network.memory_format == "channels_last";
  o.owner = data.crash_label.empty() ? nullptr : data.crash_label.c_str();
  return o;
}

Trainer::Trainer(const Experiment& experiment, Components components, Context context, RunPaths paths)
    : e_(experiment), c_(std::move(components)), context_(std::move(context)), paths_(std::move(paths)) {
  plan_ = make_epoch_plan(e_, c_.train_data.object->size(), context_);
  parameters_ = c_.network.object->parameters();
  scaler_.enabled = autocast_dtype(e_.loop.precision) == at::kHalf;
  config_hash_ = sha256_hex(to_yaml(e_.resolved()));
  for (auto& group : c_.optimizer->param_groups()) base_lrs_.push_back(group.options().get_lr());

  stages_.run = [this] { default_run(); };
  stages_.should_continue = [this] { return default_should_continue(); };
  stages_.epoch = [this](int64_t epoch) { default_epoch(epoch); };
  stages_.train_batches = [this](int64_t epoch) { return default_train_batches(epoch); };
  stages_.train_step = [this](const Batch& batch) { return default_train_step(batch); };
  stages_.test = [this] { return default_test(); };
  stages_.checkpoint = [this] { default_checkpoint(); };
  stages_.schedule = [this](int64_t step, int64_t total) {
    return schedule_factor(e_.schedule, step, total, base_lrs_.empty() ? 0 : base_lrs_[0]);
  };
}

void Trainer::set_communicator(Communicator* comm) {
  comm_ = comm;
  if (comm_)
    reducer_ = std::make_shared<GradientReducer>(*comm_, c_.network.object->parameters(),
                                                 static_cast<size_t>(e_.distributed.bucket_mb) << 20);
}

const Dataset& Trainer::test_dataset() const {
  if (!c_.test_data.object) throw Error("this experiment has no dataset.test");
  return *c_.test_data.object;
}

void Trainer::resume(const std::string& checkpoint, Verify verify) {
  CheckpointState state = load_checkpoint(checkpoint, *c_.network.object, *c_.optimizer, verify);
  if (state.stage != stage_.index)
    throw Error(checkpoint + ": checkpoint of stage " + std::to_string(state.stage + 1) + ", not of stage " +
                std::to_string(stage_.index + 1));
  stage_.first_iteration = state.stage_first_iteration;
  // A stage starts where the one before it ended, which is earlier than the
  // sum of their epochs when that one stopped on a `stopping:` criterion.
  if (state.stage_first_epoch >= 0) stage_.first_epoch = state.stage_first_epoch;
  at_ = state.at;
  best_ = state.best;
  has_best_ = state.has_best;
  bad_epochs_ = state.epochs_without_improvement;
  values_ = state.values;
  if (scaler_.enabled && state.loss_scale > 0) {
    scaler_.scale = state.loss_scale;
    scaler_.finite_in_a_row = state.loss_scale_finite_in_a_row;
    scaler_.skipped = state.loss_scale_skipped;
  }
  // A stage that had reached its target at this checkpoint's epoch stays
  // stopped, as the uninterrupted run did (a multi-stage run goes on with the
  // next stage from these weights).
  if (at_.position == 0 && at_.epoch > stage_.first_epoch) {
    if (auto reached = target_reached(); reached && !reached->empty()) {
      criterion_stop_ = true;
      request_stop(*reached + " (at the checkpoint)");
    }
  }
  // Events logged after this checkpoint happened in a future that is being
  // replayed: drop them so metrics.jsonl tells one consistent history.
  if (writes_files() && fs::exists(paths_.metrics)) {
    std::string kept;
    for (const auto& line : read_lines(paths_.metrics)) {
      auto at = line.find("\"iteration\": ");
      if (at != std::string::npos && std::stoll(line.substr(at + 13)) > at_.iteration) continue;
      kept += line + "\n";
    }
    write_file_atomic(paths_.metrics, kept);
  }
  if (state.train_meters.size() == c_.train_meters.size())
    for (size_t i = 0; i < state.train_meters.size(); ++i) {
      // Saved as the sum over ranks: rank 0 carries it, the others restart from zero.
      auto acc = context_.rank == 0 ? state.train_meters[i] : std::vector<double>(state.train_meters[i].size(), 0.0);
      guarded(*c_.train_meters[i].config, "set_accumulators", [&] { c_.train_meters[i].object->set_accumulators(acc); });
    }
}

void Trainer::continue_from(Trainer& previous) {
  at_ = previous.at_;
  stage_.first_iteration = at_.iteration;
  // This stage trains its own loop.epochs from here, also when the previous
  // stage ended early on its stopping criterion.
  stage_.first_epoch = at_.epoch;
  values_ = previous.values_;
  started_ = previous.started_;  // wall_s covers every stage this process trained
  if (scaler_.enabled && previous.scaler_.enabled) scaler_ = previous.scaler_;  // fp16 stages share one loss scale
  if (previous.e_.stopping.monitor == e_.stopping.monitor && previous.e_.stopping.mode == e_.stopping.mode) {
    best_ = previous.best_;
    has_best_ = previous.has_best_;
  }
  at::NoGradGuard no_grad;
  auto from = previous.network().named_parameters();
  for (auto& p : c_.network.object->named_parameters()) p.value().copy_(from[p.key()]);
  auto from_buffers = previous.network().named_buffers();
  for (auto& b : c_.network.object->named_buffers()) b.value().copy_(from_buffers[b.key()]);
}

template <class F>
void Trainer::each_callback(const char* stage, F&& f) {
  for (auto& cb : c_.callbacks) guarded(*cb.config, stage, [&] { f(*cb.object); });
}

void Trainer::install_overrides() {
  // Each override's replacement runs under its name, so a failure inside it
  // (but not inside a default it calls) is reported against it.
  for (auto& o : c_.overrides) {
    guarded(*o.config, "install", [&] { o.object->install(stages_, *this); });
    const ComponentConfig& who = *o.config;
    for (const auto& stage : o.object->replaces()) {
      if (stage == "train_batches") custom_batches_ = true;
      if (stage == "run") stages_.run = [f = stages_.run, &who] { guarded(who, "stage run", f); };
      if (stage == "should_continue")
        stages_.should_continue = [f = stages_.should_continue, &who] { return guarded(who, "stage should_continue", f); };
      if (stage == "epoch")
        stages_.epoch = [f = stages_.epoch, &who](int64_t e) { guarded(who, "stage epoch", [&] { f(e); }); };
      if (stage == "train_batches")
        stages_.train_batches = [f = stages_.train_batches, &who](int64_t e) {
          return guarded(who, "stage train_batches", [&] { return f(e); });
        };
      if (stage == "train_step")
        stages_.train_step = [f = stages_.train_step, &who](const Batch& b) {
          return guarded(who, "stage train_step", [&] { return f(b); });
        };
      if (stage == "test") stages_.test = [f = stages_.test, &who] { return guarded(who, "stage test", f); };
      if (stage == "checkpoint") stages_.checkpoint = [f = stages_.checkpoint, &who] { guarded(who, "stage checkpoint", f); };
      if (stage == "schedule")
        stages_.schedule = [f = stages_.schedule, &who](int64_t step, int64_t total) {
          return guarded(who, "stage schedule", [&] { return f(step, total); });
        };
    }
  }
}

void Trainer::run() {
  install_overrides();
  const int64_t start_iteration = at_.iteration;
  stages_.run();
  // A run that had nothing left to do keeps the summary of the run that did it.
  if (writes_files() && (at_.iteration != start_iteration || !fs::exists(paths_.summary)))
    write_summary(seconds_since(started_));
}

void Trainer::default_run() {
  each_callback("before_run", [&](Callback& cb) { cb.before_run(*this); });
  while (stages_.should_continue()) stages_.epoch(at_.epoch);
  each_callback("after_run", [&](Callback& cb) { cb.after_run(*this); });
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
  const bool stopped_early = e_.stopping.patience > 0 && bad_epochs_ >= e_.stopping.patience;
  return at_.epoch < epochs() && !stop_requested() && !stopped_early;
}

BatchStream Trainer::default_train_batches(int64_t epoch) {
  BatchStream inner = guarded(*c_.train_data.config, "get_batch", [&] {
    return batch_stream(*c_.train_data.object, plan_.indices(epoch), epoch, at_.position,
                        make_loader_options(e_, *c_.train_data.config, plan_.batch_size, context_), train_stats_);
  });
  const ComponentConfig& who = *c_.train_data.config;
  return [inner, &who] { return guarded(who, "get_batch", inner); };
}

at::Tensor Trainer::forward(const Batch& batch) {
  return forward_in_precision(context_.device.type(), e_.loop.precision, [&] {
    return guarded(*c_.network.config, "forward", [&] { return c_.network.object->forward(batch); });
  });
}

StepResult Trainer::default_train_step(const Batch& batch) {
  c_.network.object->train();
  for (auto& m : c_.frozen) m->eval();  // frozen batch norm keeps its statistics
  const int64_t k = e_.loop.iter_size;
  if (micro_ == 0) {
    c_.optimizer->zero_grad();
    if (reducer_) reducer_->prepare();
  }
  at::Tensor output = forward(batch);
  at::Tensor loss = guarded(*c_.loss.config, "compute", [&] { return c_.loss.object->compute(output, batch); });
  if (debug_ || e_.loop.nonfinite != "ignore") {
    batch_ = &batch;
    if (!std::isfinite(loss.item<double>())) {
      loss_finite_ = false;
      last_output_ = output.detach();
      if (debug_) handle_nonfinite();  // stops here, before backward
    }
  }
  // Accumulating k batches: each contributes 1/k, so the update is that of one k-times larger batch.
  if (reducer_) reducer_->set_active(micro_ == k - 1);  // communicate on the last backward only
  // fp16-mixed: backward of the scaled loss, so small gradients survive in float16.
  const double factor = scaler_.factor() / static_cast<double>(k);
  guarded(*c_.network.config, "backward", [&] { (factor != 1.0 ? loss * factor : loss).backward(); });
  if (++micro_ == k) finish_update();
  return {batch, output.detach(), loss.detach()};
}

void Trainer::set_fixed_lr(std::optional<double> lr) {
  fixed_lr_ = lr;
  auto& groups = c_.optimizer->param_groups();
  if (!lr)
    for (size_t i = 0; i < groups.size() && i < base_lrs_.size(); ++i) groups[i].options().set_lr(base_lrs_[i]);
}

void Trainer::apply_schedule() {
  if (fixed_lr_) {
    auto& groups = c_.optimizer->param_groups();
    const double first = base_lrs_.empty() ? 0 : base_lrs_[0];
    for (size_t i = 0; i < groups.size() && i < base_lrs_.size(); ++i)
      groups[i].options().set_lr(first > 0 ? *fixed_lr_ * base_lrs_[i] / first : *fixed_lr_);
    return;
  }
  const bool per_epoch = e_.schedule.unit == "epoch";
  const int64_t updates_per_epoch = (plan_.batches_per_epoch() + e_.loop.iter_size - 1) / e_.loop.iter_size;
  // Counted from the start of this stage (of the run, in a one-stage run).
  const int64_t step = per_epoch ? at_.epoch - stage_.first_epoch : (at_.iteration - stage_.first_iteration) / e_.loop.iter_size;
  const int64_t total = per_epoch ? e_.loop.epochs : e_.loop.epochs * updates_per_epoch;
  const double factor = stages_.schedule(step, total);
  auto& groups = c_.optimizer->param_groups();
  for (size_t i = 0; i < groups.size() && i < base_lrs_.size(); ++i) groups[i].options().set_lr(base_lrs_[i] * factor);
}

void Trainer::finish_update() {
  if (reducer_) reducer_->finish();  // averaged over ranks, mostly while backward ran
  std::vector<at::Tensor> grads;
  grads.reserve(parameters_.size());
  for (auto& p : parameters_)
    if (p.grad().defined()) grads.push_back(p.mutable_grad());
  at::NoGradGuard no_grad;
  // A short accumulation (the epoch ended first) still makes a mean over its batches.
  double rescale = micro_ < e_.loop.iter_size ? static_cast<double>(e_.loop.iter_size) / static_cast<double>(micro_) : 1.0;
  rescale /= scaler_.factor();  // fp16-mixed: unscaled before clipping and the optimizer
  if (rescale != 1.0)
    for (auto& g : grads) g.mul_(rescale);
  if (scaler_.enabled) {
    // An overflow in float16 gradients is the loss scaler's business, not the
    // non-finite policy's: halve the scale and skip this update. One norm of
    // the unscaled, unclamped gradients is the overflow check and, without
    // clipping by value, the clipping norm too (no second reduction).
    const bool by_value = e_.loop.clip_grad_value > 0;
    const double norm = clip_gradients(grads, 0, by_value ? 0 : e_.loop.clip_grad_norm);
    if (!scaler_.update(std::isfinite(norm))) {
      for (auto& g : grads) g.zero_();
      micro_ = 0;
      loss_finite_ = true;
      values_["loss_scale"] = scaler_.scale;
      values_["scaler_skipped_updates"] = static_cast<double>(scaler_.skipped);
      return;
    }
    values_["loss_scale"] = scaler_.scale;
    grad_norm_ = by_value ? clip_gradients(grads, e_.loop.clip_grad_value, e_.loop.clip_grad_norm) : norm;
  } else {
    grad_norm_ = clip_gradients(grads, e_.loop.clip_grad_value, e_.loop.clip_grad_norm);
  }
  // The norm is not finite when any gradient is not; across ranks the
  // averaged gradients make every rank see the same, so they decide alike
  // (a rank's own non-finite loss counts only in a single-process run).
  const bool bad = !std::isfinite(grad_norm_) || (!comm_ && !loss_finite_);
  if (bad && (debug_ || e_.loop.nonfinite != "ignore") && handle_nonfinite()) {
    for (auto& g : grads) g.zero_();  // this update is dropped
    micro_ = 0;
    loss_finite_ = true;
    return;
  }
  if (!bad) skipped_in_a_row_ = 0;
  loss_finite_ = true;
  apply_schedule();
  guarded(*c_.optimizer_plugin.config, "step", [&] { c_.optimizer->step(); });
  micro_ = 0;
  if (debug_) {
    auto broken = nonfinite_parameters(*c_.network.object, false);
    if (!broken.empty())
      throw NonFiniteStop("debug: the update at iteration " + std::to_string(at_.iteration + 1) +
                          " made parameters non-finite (finite gradients, global norm " + json_number(grad_norm_) +
                          ", lr " + json_number(c_.optimizer->param_groups().at(0).options().get_lr()) + "): " + join(broken));
  }
}

bool Trainer::handle_nonfinite() {
  Network& net = *c_.network.object;
  std::string cause;
  if (!loss_finite_ && batch_) {
    cause = "non-finite loss; " + diagnose_nonfinite_loss(net, *batch_, last_output_, e_.loss.plugin);
  } else {
    auto bad = nonfinite_gradients(net);
    auto params = nonfinite_parameters(net);
    const std::string norm = std::isnan(grad_norm_) ? "NaN" : std::isinf(grad_norm_) ? "inf" : json_number(grad_norm_);
    cause = "non-finite gradients (global norm " + norm + ")" +
            (bad.empty() ? std::string() : " in " + join(bad)) +
            (params.empty() ? std::string() : "; non-finite parameters: " + join(params));
  }
  const std::string step = "iteration " + std::to_string(at_.iteration + 1) + " (epoch " + std::to_string(at_.epoch + 1) +
                           ", batch " + std::to_string(at_.position + 1) + ")";
  if (!debug_ && e_.loop.nonfinite == "skip" && ++skipped_in_a_row_ < e_.loop.nonfinite_max_skips) {
    ++skipped_updates_;
    values_["skipped_updates"] = static_cast<double>(skipped_updates_);
    context_.log("skipped the update at " + step + ": " + cause);
    return true;
  }
  if (debug_) throw NonFiniteStop("debug: stopped at " + step + ": " + cause);
  // The weights are still those of the last good update: keep them, at this batch.
  stages_.checkpoint();
  throw NonFiniteStop("stopped at " + step + ": " + cause +
                      (e_.loop.nonfinite == "skip" ? " (" + std::to_string(skipped_in_a_row_) + " updates in a row)" : "") +
                      "; the last good state is checkpointed at this batch (set loop.nonfinite: skip to drop such "
                      "updates, or lower the learning rate and resume with --allow-config-change)");
}

void Trainer::empty_step() {
  // This rank's shard ran out one batch before another's: take part in the
  // gradient average with zeros, so that every rank steps the same way.
  if (micro_ == 0) {
    c_.optimizer->zero_grad();
    reducer_->prepare();
  }
  reducer_->set_active(micro_ == e_.loop.iter_size - 1);
  if (context_.sync_batch_norm) {
    // Synchronized batch norm layers make collectives in forward and backward:
    // run them on an empty batch (contributing zero samples).
    std::vector<int64_t> shape{0};
    shape.insert(shape.end(), context_.dataset.sample_shape.begin(), context_.dataset.sample_shape.end());
    Batch empty{at::zeros(shape, at::kFloat).to(context_.device), at::zeros({0}, at::kLong).to(context_.device), {}};
    at::Tensor output = guarded(*c_.network.config, "forward", [&] { return c_.network.object->forward(empty); });
    guarded(*c_.network.config, "backward", [&] { (output.sum() * 0).backward(); });
  }
  if (++micro_ == e_.loop.iter_size) finish_update();  // steps with the other ranks' gradients
}

MeterValues Trainer::meter_values(const std::vector<Built<Meter>>& meters, const std::string& prefix) {
  MeterValues out;
  for (const auto& m : meters) {
    // Over ranks: the summed accumulators give the exact value over all shards.
    std::vector<double> local;
    if (comm_) {
      local = guarded(*m.config, "accumulators", [&] { return m.object->accumulators(); });
      auto global = comm_->sum(local);
      guarded(*m.config, "set_accumulators", [&] { m.object->set_accumulators(global); });
    }
    auto values = guarded(*m.config, "values", [&] { return m.object->values(); });
    if (comm_) guarded(*m.config, "set_accumulators", [&] { m.object->set_accumulators(local); });
    for (const auto& [k, v] : values) out[prefix + k] = v;
  }
  return out;
}

void Trainer::default_epoch(int64_t epoch) {
  each_callback("before_epoch", [&](Callback& cb) { cb.before_epoch(*this); });
  if (at_.position == 0) {
    for (auto& m : c_.train_meters) guarded(*m.config, "reset", [&] { m.object->reset(); });
    train_stats_->bad_records = 0;  // counted per epoch
  }

  BatchStream batches = stages_.train_batches(epoch);
  double train_seconds = 0, wait_seconds = 0;
  int64_t train_samples = 0;
  while (true) {
    check_stop_signal();
    // A stop waits for the end of an accumulation (iter_size), so that no
    // update is cut short and a resumed run continues exactly.
    if (!comm_ && stop_requested() && micro_ == 0) break;
    // Checkpoint every T seconds (rank 0's clock decides), between updates.
    const bool due = e_.loop.checkpoint_every_secs > 0 && micro_ == 0 && context_.rank == 0 &&
                     seconds_since(last_checkpoint_) >= e_.loop.checkpoint_every_secs;
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<Batch> batch = batches();
    wait_seconds += seconds_since(t0);
    bool checkpoint_now = due;
    if (comm_) {
      // Ranks agree on every decision: whether anyone still has data, whether anyone stops, whether to checkpoint.
      auto flags = comm_->sum({batch ? 1.0 : 0.0, stop_requested() ? 1.0 : 0.0, signal_stop_ ? 1.0 : 0.0, due ? 1.0 : 0.0});
      if (flags[2] > 0) signal_stop_ = true;  // every rank exits as resumable
      if (flags[1] > 0 && !stop_requested()) request_stop("requested by another rank");
      if ((flags[1] > 0 && micro_ == 0) || flags[0] == 0) break;
      checkpoint_now = flags[3] > 0;
    }
    if (checkpoint_now && (batch || comm_)) stages_.checkpoint();  // at this batch, before training on it
    if (comm_) {
      if (!batch) {
        empty_step();
        ++at_.position;
        ++at_.iteration;
        continue;
      }
    }
    if (!batch) break;
    each_callback("before_train_iter", [&](Callback& cb) { cb.before_train_iter(*this, *batch); });
    StepResult result = stages_.train_step(*batch);
    ++at_.position;
    ++at_.iteration;
    for (auto& m : c_.train_meters)
      guarded(*m.config, "update", [&] { m.object->update({result.batch, result.output, result.loss}); });
    train_seconds += seconds_since(t0);
    train_samples += batch->size();
    each_callback("after_train_iter", [&](Callback& cb) { cb.after_train_iter(*this, result); });

    if (at_.iteration % e_.loop.log_every_iters == 0) {
      MeterValues v = meter_values(c_.train_meters, "train_");
      for (const auto& [k, x] : v) values_[k] = x;
      v["lr"] = c_.optimizer->param_groups().at(0).options().get_lr();
      v["grad_norm"] = grad_norm_;
      log("train", v);
    }
    if (e_.loop.test_every_iters > 0 && at_.iteration % e_.loop.test_every_iters == 0) {
      for (const auto& [k, x] : stages_.test()) values_[k] = x;
      tested_at_ = at_.iteration;
    }
    if (e_.loop.checkpoint_every_iters > 0 && at_.iteration % e_.loop.checkpoint_every_iters == 0)
      stages_.checkpoint();
  }
  if (micro_ > 0) finish_update();  // the epoch ended inside an accumulation
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
  for (const auto& [k, x] : v) values_[k] = x;
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
  }
  v["lr"] = c_.optimizer->param_groups().at(0).options().get_lr();
  v["grad_norm"] = grad_norm_;
  log("train", v);
  if (tested_at_ != at_.iteration)  // the periodic test may have just run on this state
    for (const auto& [k, x] : stages_.test()) values_[k] = x;
  const bool best = judge_epoch();
  stages_.checkpoint();
  if (best && e_.stopping.keep_best && writes_files()) {
    // The best epoch stays, whatever the rotation of checkpoints deletes.
    const std::string latest = (fs::path(paths_.checkpoints) / checkpoint_file_name(at_)).string();
    const std::string best = (fs::path(paths_.checkpoints) / "best.pt").string();
    if (fs::exists(latest)) {
      replace_file_atomic(best, [&](const std::string& tmp) { fs::copy_file(latest, tmp, fs::copy_options::overwrite_existing); });
      replace_file_atomic(manifest_path(best), [&](const std::string& tmp) {
        fs::copy_file(manifest_path(latest), tmp, fs::copy_options::overwrite_existing);
      });
    }
  }
  each_callback("after_epoch", [&](Callback& cb) { cb.after_epoch(*this); });
}

MeterValues Trainer::default_test() {
  if (!c_.test_data.object) return {};
  each_callback("before_test", [&](Callback& cb) { cb.before_test(*this); });
  MeterValues v = test_pass();
  log("test", v);
  each_callback("after_test", [&](Callback& cb) { cb.after_test(*this, v); });
  return v;
}

MeterValues Trainer::test_pass() {
  if (!c_.test_data.object)
    throw LocatedConfigError(e_.path + ": dataset.test: the experiment has no test dataset",
                             "expected dataset.test: {plugin: ...}", "");
  for (auto& m : c_.test_meters) guarded(*m.config, "reset", [&] { m.object->reset(); });
  test_stats_->bad_records = 0;  // counted per test pass
  Network& net = *c_.network.object;
  net.eval();
  {
    at::NoGradGuard no_grad;
    const int64_t size = c_.test_data.object->size();
    const int64_t count = e_.loop.test_samples > 0 ? std::min(e_.loop.test_samples, size) : size;
    std::vector<int64_t> order;  // this rank's share: every world_size-th sample
    for (int64_t i = context_.rank; i < count; i += context_.world_size) order.push_back(i);
    const int64_t batch_size = e_.loop.test_batch_per_device > 0 ? e_.loop.test_batch_per_device : e_.loop.batch_per_device;
    // Test samples are decoded as in epoch 0: the same pass every time.
    BatchStream batches = guarded(*c_.test_data.config, "get_batch", [&] {
      return batch_stream(*c_.test_data.object, std::move(order), 0, 0,
                          make_loader_options(e_, *c_.test_data.config, batch_size, context_), test_stats_);
    });
    while (true) {
      std::optional<Batch> batch = guarded(*c_.test_data.config, "get_batch", batches);
      if (!batch) break;
      at::Tensor output = forward(*batch);
      at::Tensor loss = guarded(*c_.loss.config, "compute", [&] { return c_.loss.object->compute(output, *batch); });
      for (auto& m : c_.test_meters) guarded(*m.config, "update", [&] { m.object->update({*batch, output, loss}); });
    }
  }
  net.train();
  MeterValues v = meter_values(c_.test_meters, "test_");
  if (c_.test_data.config->skip_bad_records) v["test_bad_records"] = static_cast<double>(test_stats_->bad_records.load());
  return v;
}

void Trainer::default_checkpoint() {
  each_callback("before_checkpoint", [&](Callback& cb) { cb.before_checkpoint(*this); });
  CheckpointState state;
  state.at = at_;
  state.best = best_;
  state.has_best = has_best_;
  state.epochs_without_improvement = bad_epochs_;
  state.stage = stage_.index;
  state.stage_first_iteration = stage_.first_iteration;
  state.stage_first_epoch = stage_.first_epoch;
  state.values = values_;
  if (scaler_.enabled) {
    state.loss_scale = scaler_.scale;
    state.loss_scale_finite_in_a_row = scaler_.finite_in_a_row;
    state.loss_scale_skipped = scaler_.skipped;
  }
  for (const auto& m : c_.train_meters) {
    auto local = guarded(*m.config, "accumulators", [&] { return m.object->accumulators(); });
    state.train_meters.push_back(comm_ ? comm_->sum(local) : local);  // the sum over ranks
  }
  state.config_hash = config_hash_;
  const std::string path = (fs::path(paths_.checkpoints) / checkpoint_file_name(at_)).string();
  last_checkpoint_ = std::chrono::steady_clock::now();
  if (writes_files()) {  // the ranks hold the same weights: rank 0 saves them
    fs::create_directories(paths_.checkpoints);
    try {
      save_checkpoint(path, *c_.network.object, *c_.optimizer, state);
    } catch (const Error& err) {
      // A full disk or a file size limit: the temporary file is gone, the older checkpoints are as they were.
      auto kept = list_checkpoints(paths_.checkpoints);
      kept.erase(std::remove(kept.begin(), kept.end(), path), kept.end());
      throw Error(std::string("checkpoint not written: ") + err.what() + "; " +
                  (kept.empty() ? std::string("there is no earlier checkpoint")
                                : "the previous checkpoint " + kept.back() + " is intact"));
    }
    prune_checkpoints(paths_.checkpoints, e_.output.keep_checkpoints);
  }
  if (comm_) comm_->barrier();
  each_callback("after_checkpoint", [&](Callback& cb) { cb.after_checkpoint(*this, path); });
}

bool Trainer::minimized(const std::string& meter) const {
  const auto& s = e_.stopping;
  return s.mode == "min" || (s.mode == "auto" && meter.find("loss") != std::string::npos);
}

std::string Trainer::stopping_where(const std::string& key) const {
  return e_.where("stopping." + key);
}

std::optional<std::string> Trainer::target_reached() const {
  const auto& s = e_.stopping;
  if (s.target_meter.empty()) return std::string();
  auto it = values_.find(s.target_meter);
  if (it == values_.end()) return std::nullopt;
  const double v = it->second;
  if (!(minimized(s.target_meter) ? v <= s.target : v >= s.target)) return std::string();
  return "target reached: " + s.target_meter + " " + json_number(v) + (minimized(s.target_meter) ? " <= " : " >= ") +
         json_number(s.target);
}

bool Trainer::judge_epoch() {
  const auto& s = e_.stopping;
  auto value_of = [&](const std::string& meter) -> std::optional<double> {
    auto it = values_.find(meter);
    if (it == values_.end()) return std::nullopt;
    return it->second;
  };
  if (!s.target_meter.empty()) {
    auto reached = target_reached();
    if (!reached) throw LocatedConfigError(stopping_where("target_meter") + ": no meter value '" + s.target_meter + "'",
                                           "expected one of the run's values, e.g. test_accuracy_top1", "");
    if (!reached->empty()) {
      criterion_stop_ = stop_reason_.empty();
      request_stop(*reached);
    }
  }
  if (s.monitor.empty()) return false;
  auto v = value_of(s.monitor);
  if (!v) throw LocatedConfigError(stopping_where("monitor") + ": no meter value '" + s.monitor + "'",
                                   "expected one of the run's values, e.g. test_loss", "");
  const double gain = minimized(s.monitor) ? best_ - *v : *v - best_;
  const bool improved = !has_best_ || gain > s.min_delta;
  if (improved) {
    best_ = *v;
    has_best_ = true;
    bad_epochs_ = 0;
  } else if (++bad_epochs_ >= s.patience && s.patience > 0) {
    criterion_stop_ = criterion_stop_ || stop_reason_.empty();
    request_stop("early stop: " + s.monitor + " did not improve for " + std::to_string(bad_epochs_) +
                 " epochs (best " + json_number(best_) + ")");
  }
  return improved;
}

void Trainer::log(const std::string& phase, const MeterValues& values) {
  // Rank 0 writes the run's metrics.jsonl; the other ranks their own
  // logs/rank-N.jsonl (the same events, with their own timings).
  std::string file = paths_.metrics;
  if (!writes_files()) {
    file = (fs::path(paths_.run_dir) / "logs" / ("rank-" + std::to_string(context_.rank) + ".jsonl")).string();
    fs::create_directories(fs::path(file).parent_path());
  }
  // The epoch an event belongs to, counted from 1; events after an epoch's
  // last iteration (its test pass) carry that epoch's number.
  const int64_t epoch_number = at_.position == 0 ? at_.epoch : at_.epoch + 1;
  append_line(file, "{\"phase\": " + json_string(phase) + ", \"epoch\": " + std::to_string(epoch_number) +
                                  ", \"iteration\": " + std::to_string(at_.iteration) +
                                  (stage_.count > 1 ? ", \"stage\": " + json_string(stage_.name) : std::string()) +
                                  ", \"time\": " + json_number(static_cast<double>(std::time(nullptr))) +
                                  ", \"values\": " + json_object(values) + "}");
}

void Trainer::request_stop(const std::string& reason) {
  if (stop_reason_.empty()) {
    stop_reason_ = reason.empty() ? "requested" : reason;
    context_.log("stopping: " + stop_reason_);
  }
}

void Trainer::write_summary(double wall_s) {
  std::string s = "{\n  \"experiment\": " + json_string(e_.name) +
                  ",\n  \"epochs_completed\": " + std::to_string(at_.epoch) +
                  ",\n  \"iteration\": " + std::to_string(at_.iteration) +
                  (stage_.count > 1 ? ",\n  \"stage\": " + json_string(stage_.name) : std::string()) +
                  ",\n  \"metrics\": " + json_object(values_) +
                  ",\n  \"samples_per_sec\": " + json_number(samples_per_sec_) +
                  ",\n  \"secs_per_train\": " + json_number(secs_per_train_) +
                  ",\n  \"wall_s\": " + json_number(wall_s) +
                  (stop_reason_.empty() ? "" : ",\n  \"stopped\": " + json_string(stop_reason_)) +
                  (has_best_ ? ",\n  \"best\": {\"meter\": " + json_string(e_.stopping.monitor) +
                                   ", \"value\": " + json_number(best_) + "}"
                             : "") +
                  "\n}\n";
  write_file_atomic(paths_.summary, s);
}

}  // namespace trainyard::host
