// One training run, start to end (Runner::train): its session joined, the
// ranks' checks and the run lock (run/rank_checks.h), the checkpoint to
// resume (run/resume_choice.h), the run directory (run/run_directory.h), and
// the stages in order, one EpochLoop each, assembled with the run's hooks
// (run/run_hooks.h), watched for stalls and handed the stop signals.
#include "run/runner.h"

#include <csignal>
#include <filesystem>

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <nlohmann/json.hpp>

#include "distributed/device.h"
#include "log/log.h"
#include "report/report.h"
#include "run/assembly.h"
#include "run/auto_choices.h"
#include "run/experiment_file.h"
#include "run/provenance.h"
#include "run/rank_checks.h"
#include "run/resume_choice.h"
#include "run/run_directory.h"
#include "run/run_hooks.h"
#include "run/session.h"
#include "train/checkpoint_store.h"
#include "train/complexity.h"
#include "train/epoch_loop.h"
#include "train/generator_states.h"
#include "train/loader_settings.h"
#include "train/profiler.h"
#include "train/wiring_check.h"
#include "trainyard/error.h"
#include "util/process.h"
#include "util/shape.h"
#include "util/text.h"
#include "util/watchdog.h"

namespace fs = std::filesystem;

namespace trainyard::host {

void check_profile_window(const std::string& window) { parse_profile_window(window); }

namespace {

// Runner::train's run: one per call, its session joined as it is made.
class TrainingRun {
 public:
  /// `experiment` and `registry` must outlive the run; `run_dir`: the
  /// Runner's run_directory(request.output_dir). Joins the process group in a
  /// data-parallel run.
  TrainingRun(const Experiment& experiment, const Registry& registry, RunRequest request, std::string run_dir);

  /// Trains every stage from where the run stands. Throws ConfigError for a
  /// run that must not go on (a foreign checkpoint, a refused config change).
  RunOutcome run();

 private:
  std::unique_ptr<EpochLoop> make_loop(size_t stage);
  /// Builds and checks every stage after `from_stage` (ConfigError naming
  /// the stage), before anything is written.
  void check_later_stages(size_t from_stage, EpochLoop& loop);
  /// provenance.json's record: the command, plugins and world, the precision,
  /// `network` (plugin, parameters, cost per sample) and `cudnn`
  /// (loop.cudnn_benchmark as requested, used, and why).
  nlohmann::ordered_json provenance(const nlohmann::ordered_json& network, const nlohmann::ordered_json& cudnn) const;
  /// What the network costs per sample (train/complexity.h), for provenance.json.
  nlohmann::ordered_json network_facts(EpochLoop& loop) const;
  /// Everything after the run directory is written: the stages' training.
  RunOutcome train_stages(std::unique_ptr<EpochLoop>& loop);
  void announce_stage(EpochLoop& loop) const;

  const Experiment& e_;
  const Registry& registry_;
  RunRequest request_;
  RunDirectory run_dir_;
  std::shared_ptr<CheckpointStore> store_;  ///< the run's checkpoints, shared with its loops
  /// Every stage's loop's debug setting and run hooks; made (--profile's window checked) before the session starts.
  TrainingSettings training_;
  std::unique_ptr<Session> session_;  ///< this rank's place in the run
  ResumePoint start_;                 ///< the checkpoint resumed (its loop moves out); none for a fresh start
  size_t current_stage_ = 0;          ///< the stage whose loop runs (or runs next)
};

}  // namespace

TrainingRun::TrainingRun(const Experiment& experiment, const Registry& registry, RunRequest request,
                         std::string run_dir)
    : e_(experiment),
      registry_(registry),
      request_(std::move(request)),
      run_dir_(std::move(run_dir)),
      store_(make_checkpoint_store(RunPaths(run_dir_.path()).checkpoints, e_)),
      training_(training_run_settings(request_, RunPaths(run_dir_.path()).profile)),
      session_(std::make_unique<Session>(e_, registry_, run_dir_.path())) {}

std::unique_ptr<EpochLoop> TrainingRun::make_loop(size_t k) {
  const Experiment& ek = e_.stage(k);
  // Every stage (the first before anything is written) seeded and checked with one batch.
  std::unique_ptr<EpochLoop> loop =
      assemble_stage(ek, session_->context, session_->comm.get(), RunPaths(run_dir_.path()), store_, &training_);
  loop->set_stop_signal(stop_signal_received);  // the handlers are install_stop_signals()'s, in train_stages()
  StageInfo info;
  info.index = static_cast<int64_t>(k);
  info.count = static_cast<int64_t>(e_.stage_count());
  info.name = ek.stage_name;
  for (size_t j = 0; j < k; ++j) info.first_epoch += e_.stage(j).loop.epochs;
  loop->set_stage(info);
  return loop;
}

void TrainingRun::check_later_stages(size_t from_stage, EpochLoop& loop) {
  // Later stages are built and checked now, each as make_loop() will build
  // it (its data, network, loss and meters, one batch through them), not
  // after the earlier stages trained and wrote checkpoints. The generators
  // are put back: the stage that trains first draws as if nothing was built.
  const GeneratorStates generators(session_->context.device);
  for (size_t k = from_stage + 1; k < e_.stage_count(); ++k) {
    try {
      check_network_settings(e_.stage(k).network, loop.network());
      Context scratch = session_->context;  // building sets its dataset info: the session's stays as it is
      if (e_.stage(k).loop.cuda_graph) {
        // Assembled whole (writing nowhere), so that a step that cannot be
        // captured is refused now, as make_loop() would refuse it later.
        const TrainingSettings check{training_.debug, training_.profile_skip, {}};
        const auto later = assemble_stage(e_.stage(k), scratch, nullptr, RunPaths(""), nullptr, &check);
        check_weights_carry_over(later->network(), loop.network(), from_stage);
        continue;
      }
      const Components built = build_checked(e_.stage(k), scratch);
      check_weights_carry_over(*built.network.object, loop.network(), from_stage);
    } catch (const ConfigError& err) {
      throw ConfigError("stage " + std::to_string(k + 1) + " '" + e_.stage(k).stage_name + "': " + err.what());
    }
  }
}

nlohmann::ordered_json TrainingRun::network_facts(EpochLoop& loop) const {
  const auto [params, trainable] = parameter_count(loop.network());
  nlohmann::ordered_json network = {{"plugin", e_.network.plugin}, {"parameters", params}, {"trainable", trainable}};
  std::string why;
  if (const auto cost = try_network_cost(e_.stage(current_stage_).loop, e_.stage(current_stage_).seed,
                                         loop.components(), session_->context, why)) {
    network["forward_flops_per_sample"] = cost->flops;
    network["activation_bytes_per_sample"] = cost->activation_bytes;
  } else {
    network["cost_not_measured"] = why;
  }
  return network;
}

nlohmann::ordered_json TrainingRun::provenance(const nlohmann::ordered_json& network,
                                               const nlohmann::ordered_json& cudnn) const {
  nlohmann::ordered_json record = provenance_json(request_.command_line, registry_, session_->world.world_size);
  record["precision"] = {{"requested", e_.loop.precision},
                         {"used", e_.loop.effective_precision()},
                         {"reason", e_.loop.precision_reason.empty() ? "as written" : e_.loop.precision_reason}};
  record["cudnn_benchmark"] = cudnn;
  record["network"] = network;
  return record;
}

void TrainingRun::announce_stage(EpochLoop& loop) const {
  if (e_.stage_count() > 1)
    InfoLine() << "trainyard: stage " << current_stage_ + 1 << "/" << e_.stage_count() << " '" << loop.stage().name
               << "': epochs " << loop.stage().first_epoch + 1 << "-" << loop.epochs() << ", optimizer "
               << e_.stage(current_stage_).optimizer.plugin << ", " << parameter_count(loop.network()).second
               << " trainable parameters\n";
}

RunOutcome TrainingRun::run() {
  const Context& context = session_->context;
  Communicator* comm = session_->comm.get();
  const std::string& dir = run_dir_.path();
  // A write past a file size limit fails with EFBIG (and is reported) instead of killing the process.
  ::signal(SIGXFSZ, SIG_IGN);
  if (comm) check_shared_output(*comm, context.rank, fs::path(dir).parent_path());
  // One run per run directory, held until this run ends (a second one stops here).
  const std::unique_ptr<RunLock> lock = take_run_lock(comm, context.rank, dir);
  // Resume before writing anything: a checkpoint that does not fit is bad input.
  if (!request_.fresh && context.rank == 0) run_dir_.check_writable();
  ResumeChoice choice(e_, request_, context, *store_, dir, [this](size_t k) { return make_loop(k); });
  if (!request_.fresh) start_ = choice.choose();
  current_stage_ = start_.stage;
  std::unique_ptr<EpochLoop> loop = start_.loop ? std::move(start_.loop) : make_loop(0);
  check_later_stages(current_stage_, *loop);
  if (comm) {
    // Same weights everywhere: the same checkpoint, then rank 0's tensors.
    comm->check_same("checkpoint to resume from", fs::path(start_.checkpoint).filename().string(),
                     "expected every rank to find the same checkpoints in the shared run directory",
                     "a checkpoint written or removed while the ranks started, or a network file system that "
                     "shows rank 0's files late: compare " +
                         dir + "/checkpoints on each machine",
                     /*show_values=*/true);
    comm->broadcast_module(*loop->network_module());
  }
  choice.check_changes(start_);
  // Rank 0 writes the run directory: only it measures the network's cost.
  const nlohmann::ordered_json network =
      context.rank == 0 ? network_facts(*loop) : nlohmann::ordered_json(nlohmann::ordered_json::object());
  const std::string& cudnn_setting = e_.stage(current_stage_).loop.cudnn_benchmark;
  const CudnnBenchmark cudnn = cudnn_benchmark_choice(cudnn_setting, context);
  const nlohmann::ordered_json cudnn_record = {
      {"requested", cudnn_setting}, {"used", cudnn.on}, {"reason", cudnn.reason}};
  on_rank0(comm, context.rank, "run directory", e_.loop.stall_timeout_secs,
           [&] { run_dir_.write(e_, request_.fresh, provenance(network, cudnn_record)); });
  try {
    return train_stages(loop);
  } catch (const ConfigError&) {
    // Bad input found while training (a label out of range in a dataset that
    // cannot list its labels up front) before the first checkpoint: the run
    // directory this run made goes, and --fresh's previous one comes back.
    if (context.rank == 0) run_dir_.undo_if_new(!store_->list().empty());
    throw;
  }
}

RunOutcome TrainingRun::train_stages(std::unique_ptr<EpochLoop>& loop) {
  const Context& context = session_->context;
  const World& world = session_->world;
  Communicator* comm = session_->comm.get();
  const auto [params, trainable] = parameter_count(loop->network());
  // Every rank's whole log, in the run directory (the console shows rank 0's).
  log_to_file(
      (fs::path(run_dir_.path()) /
       (context.rank == 0 ? std::string("trainyard.log") : "trainyard-rank" + std::to_string(context.rank) + ".log"))
          .string());
  if (context.rank != 0) checkpoints_are_rank_zeros();  // its abrupt-end lines say so
  if (world.distributed())
    InfoLine() << "trainyard: rank " << world.rank << " of " << world.world_size << " (launched by "
               << world.launched_by << "; " << comm->transport() << ")\n";

  RunOutcome outcome;
  outcome.run_dir = run_dir_.path();
  for (size_t k = 0; k < e_.stage_count(); ++k) outcome.total_epochs += e_.stage(k).loop.epochs;
  InfoLine() << "trainyard: " << e_.name << ": network " << e_.network.plugin << " (" << params << " parameters, "
             << trainable << " trainable), " << count_of(at::get_num_threads(), "thread") << ", run directory "
             << run_dir_.path() << "\n";
  if (context.rank == 0) {
    std::vector<const LoopConfig*> loops{&e_.loop};
    for (const auto& stage : e_.stages) loops.push_back(&stage.loop);
    announce_precision(loops);
  }
  {
    const DecodeThreads threads = decode_threads(e_.loop);
    InfoLine() << "trainyard: data: " << count_of(threads.count, "decode thread") << " per rank ("
               << (threads.how == "set" ? "loop.decode_threads" : threads.how) << ")" << sampling_note(e_.loop) << "\n";
  }
  if (!start_.checkpoint.empty()) {
    record_whole_checkpoint(start_.checkpoint);
    auto at = loop->position_state();
    InfoLine() << "trainyard: resuming from " << start_.checkpoint << " (epoch " << at.epoch << " done, iteration "
               << at.iteration
               << (e_.stage_count() > 1
                       ? ", stage " + std::to_string(current_stage_ + 1) + " '" + loop->stage().name + "'"
                       : "")
               << ")\n";
    if (at.epoch >= outcome.total_epochs && at.position == 0)
      InfoLine() << "trainyard: "
                 << (outcome.total_epochs == 1 ? "the only epoch is"
                                               : "all " + count_of(outcome.total_epochs, "epoch") + " are")
                 << " already done; raise loop.epochs to train more\n";
  }
  install_stop_signals(e_.loop.stop_signals);
  // Registered again now, so that the exit() report runs before the static
  // destructors of everything loaded since start-up (a no-op in-process).
  renew_exit_guard();
  // Each stage's loop runs watched with that stage's limits; the stacks of a stall go to the run directory.
  auto run_stage = [&](EpochLoop& stage_loop) {
    announce_stage(stage_loop);
    const LoopConfig& limits = e_.stage(current_stage_).loop;
    at::globalContext().setBenchmarkCuDNN(cudnn_benchmark_choice(limits.cudnn_benchmark, context).on);
    StallWatchdog watchdog(
        {limits.stall_timeout_secs, limits.stop_grace_secs,
         (fs::path(run_dir_.path()) / ("stall-rank" + std::to_string(context.rank) + ".txt")).string()});
    stage_loop.run();
  };
  run_stage(*loop);
  // Later stages start from the weights the previous one ended with, with their own optimizer.
  while (current_stage_ + 1 < e_.stage_count() && !loop->ended_by_request()) {
    std::unique_ptr<EpochLoop> next;
    try {
      next = make_loop(++current_stage_);
    } catch (const ConfigError& err) {
      throw ConfigError("stage " + std::to_string(current_stage_ + 1) + " '" + e_.stage(current_stage_).stage_name +
                        "': " + err.what());
    }
    next->continue_from(*loop);
    loop = std::move(next);
    run_stage(*loop);
  }
  // What each rank's process holds on which GPU (a rank on another rank's GPU shows here).
  if (context.device.is_cuda())
    InfoLine() << "trainyard: rank " << context.rank << " peak GPU memory: " << gpu_memory_peaks() << "\n";
  outcome.epochs_done = loop->epoch();
  outcome.iteration = loop->iteration();
  outcome.values = loop->values();
  outcome.stopped_by_signal = loop->stopped_by_signal();
  const RunPaths paths(run_dir_.path());
  if (context.rank == 0 && e_.output.report && fs::exists(paths.metrics))
    outcome.report = write_report(run_dir_.path(), e_.output.plots);
  return outcome;
}

RunOutcome Runner::train(const RunRequest& request) const {
  return TrainingRun(experiment_, registry_, request, run_directory(request.output_dir)).run();
}

}  // namespace trainyard::host
