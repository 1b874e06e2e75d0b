// One training run, start to end (Runner::train): picks and verifies the
// checkpoint to resume, refuses a changed config unless allowed, keeps the run
// directory (config snapshot, provenance, report), installs the stop signals,
// and sequences the stages, one EpochLoop each; it owns the stall watchdog and
// hands the loop the stop signals.
#include "run/runner.h"

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <random>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/utils.h>

#include <nlohmann/json.hpp>

#include "config/config_diff.h"
#include "config/snapshot.h"
#include "distributed/device.h"
#include "formats/metrics.h"
#include "log/log.h"
#include "report/report.h"
#include "run/assembly.h"
#include "run/experiment_file.h"
#include "run/provenance.h"
#include "run/run_lock.h"
#include "run/session.h"
#include "train/checkpoint_store.h"
#include "train/complexity.h"
#include "train/epoch_loop.h"
#include "train/generator_states.h"
#include "train/loader_settings.h"
#include "train/profiler.h"
#include "train/wiring_check.h"
#include "trainyard/error.h"
#include "util/files.h"
#include "util/json.h"
#include "util/process.h"
#include "util/shape.h"
#include "util/text.h"
#include "util/watchdog.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

// A run directory to resume in must take new files (checkpoints, metrics):
// said as it is, before a load fails on the first write and reads as a bad
// checkpoint. (access() also says EROFS for a read-only file system.)
void check_run_directory_writable(const std::string& run_dir) {
  for (const fs::path& dir : {fs::path(run_dir), fs::path(run_dir) / "checkpoints"}) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec) || ::access(dir.c_str(), W_OK | X_OK) == 0) continue;
    const int err = errno;
    throw ConfigError(dir.string() + ": the run directory is not writable (" + std::strerror(err) + ")",
                      "expected a run directory this user can write: resuming writes checkpoints and appends to "
                      "metrics.jsonl",
                      "make it writable (its permissions, or a read-only mount), or copy the run and pass --output-dir "
                      "with the copy's folder");
  }
}

std::string timestamp() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

// Rank 0 writes checkpoints and every rank resumes from them, so the ranks
// must share the output folder: rank 0 leaves a token there and the others
// read it back. (Ranks on several machines need a network file system.)
void check_shared_output(Communicator& comm, int rank, const fs::path& folder) {
  std::string token, token_file, rank0_failure;
  if (rank == 0) {
    std::random_device random;
    token = std::to_string(random()) + std::to_string(random()) + "-" + std::to_string(::getpid());
    token_file = (folder / (".trainyard-shared-" + token)).string();
    try {
      fs::create_directories(folder);
      write_file_atomic(token_file, token);
    } catch (const std::exception& e) {
      rank0_failure = e.what();
    }
  }
  // Rank 0 says where it wrote which token (or that it could not).
  const std::vector<std::string> from_zero = comm.exchange(rank != 0               ? ""
                                                           : rank0_failure.empty() ? token + "\n" + folder.string()
                                                                                   : "\n" + rank0_failure);
  const size_t newline = from_zero[0].find('\n');
  const std::string zero_token = from_zero[0].substr(0, newline), zero_said = from_zero[0].substr(newline + 1);
  if (zero_token.empty())
    throw ConfigError("output folder " + folder.string() + ": rank 0 cannot write there (" + zero_said + ")",
                      "expected a writable output folder shared by every rank", "");
  std::string seen = "ok";
  if (rank != 0) {
    const fs::path expected_file = folder / (".trainyard-shared-" + zero_token);
    std::error_code ec;
    if (!fs::exists(expected_file, ec))
      seen = "it found no " + expected_file.filename().string() + " in " + folder.string();
    else if (read_lines(expected_file.string()) != std::vector<std::string>{zero_token})
      seen = "it found another token in " + expected_file.string();
  }
  const std::vector<std::string> seen_by = comm.exchange(seen);
  if (rank == 0) {
    std::error_code ignored;
    fs::remove(token_file, ignored);
  }
  for (size_t r = 1; r < seen_by.size(); ++r)
    if (seen_by[r] != "ok")
      throw ConfigError("output folder " + zero_said + ": rank " + std::to_string(r) +
                            " does not see the folder rank 0 writes (rank 0 left a token there; " + seen_by[r] + ")",
                        "expected one output folder shared by every rank: rank 0 writes the run directory and "
                        "checkpoints, and every rank resumes from them",
                        "point --output-dir (or output.dir) at a folder every machine mounts, e.g. on NFS");
}

// Rank 0 takes the run's lock; the others learn whether it did, and check
// that they see the lock it holds (the same host and PID in the record).
std::unique_ptr<RunLock> take_run_lock(Communicator* comm, int rank, const std::string& run_dir) {
  std::unique_ptr<RunLock> lock;
  std::string refusal;
  if (rank == 0) {
    try {
      lock = RunLock::acquire(run_dir);
    } catch (const ConfigError& e) {
      refusal = e.what();
    }
  }
  if (!comm) {
    if (!refusal.empty()) throw ConfigError(refusal);
    return lock;
  }
  auto who = [](const LockHolder& h) { return h.host + ":" + std::to_string(h.pid); };
  const std::string zero = comm->exchange(rank != 0         ? ""
                                          : refusal.empty() ? "held\n" + who(lock->holder())
                                                            : "refused\n" + refusal)[0];
  const size_t newline = zero.find('\n');
  if (zero.substr(0, newline) == "refused") throw ConfigError(zero.substr(newline + 1));
  std::string seen = "ok";
  if (rank != 0 && who(read_lock_holder(run_lock_path(run_dir))) != zero.substr(newline + 1))
    seen = "its " + run_lock_path(run_dir) + " does not name rank 0's process " + zero.substr(newline + 1);
  const std::vector<std::string> seen_by = comm->exchange(seen);
  for (size_t r = 1; r < seen_by.size(); ++r)
    if (seen_by[r] != "ok")
      throw ConfigError(
          run_dir + ": rank " + std::to_string(r) + " does not see the run lock rank 0 holds (" + seen_by[r] + ")",
          "expected every rank to see one run directory and its lock",
          "point --output-dir (or output.dir) at a folder every machine mounts");
  return lock;
}

// The plugin libraries providing the experiment's components, every stage's.
std::vector<const LibraryInfo*> plugin_libraries_of(const Experiment& experiment) {
  std::vector<const LibraryInfo*> used;
  auto note = [&](const ComponentConfig& c) {
    if (c.component && c.component->library &&
        std::find(used.begin(), used.end(), c.component->library.get()) == used.end())
      used.push_back(c.component->library.get());
  };
  auto note_all = [&](const Experiment& e) {
    for (const auto* c : {&e.train_data, &e.test_data, &e.network, &e.loss, &e.optimizer}) note(*c);
    for (const auto* list : {&e.meters, &e.callbacks, &e.overrides})
      for (const auto& c : *list) note(c);
  };
  note_all(experiment);
  for (const auto& stage : experiment.stages) note_all(stage);
  return used;
}

}  // namespace

void check_profile_window(const std::string& window) { parse_profile_window(window); }

namespace {
// --until-epoch N: a stop requested once N epochs (of all stages) are done,
// after that epoch's test and checkpoint; not a stopping criterion, so the
// next `trainyard run` continues the same schedule.
class UntilEpoch final : public HostHook {
 public:
  explicit UntilEpoch(int64_t epochs) : epochs_(epochs) {}
  std::string name() const override { return "--until-epoch"; }
  void before_run(LoopState& t) override { check(t); }
  void after_epoch(LoopState& t) override { check(t); }

 private:
  void check(LoopState& t) {
    if (t.epoch() >= epochs_ && !t.stop_requested())
      t.request_stop("--until-epoch " + std::to_string(epochs_) + " reached");
  }
  int64_t epochs_;
};
}  // namespace

namespace {
// loop.cudnn_benchmark resolved for this process (auto: on where the input
// shape is fixed, as PyTorch users set torch.backends.cudnn.benchmark).
struct CudnnBenchmark {
  bool on = false;
  std::string reason;
};
CudnnBenchmark cudnn_benchmark_choice(const std::string& setting, const Context& context) {
  if (!context.device.is_cuda()) return {false, "not a CUDA run: cuDNN is not used"};
  if (setting != "auto") return {setting == "true", "as written"};
  if (context.dataset.sample_shape.empty())
    return {false, "auto: the datasets give no fixed sample shape (the autotuner would time every new shape)"};
  return {true, "auto: a CUDA run with a fixed sample shape " + shape_text(context.dataset.sample_shape)};
}
}  // namespace

namespace {
// Tells the stall watchdog where the loop is (one relaxed store each): at
// every iteration boundary, and once a step is done, so that a hang in its
// after_train_iter names that iteration.
class WatchedPosition final : public HostHook {
 public:
  std::string name() const override { return "stall watchdog's position"; }
  void before_fetch(LoopState& t) override { mark(t); }
  void after_train_iter(LoopState& t, const StepResult&) override { mark(t); }

 private:
  static void mark(const LoopState& t) {
    WatchedProgress& p = watched_progress();
    p.epoch.store(t.epoch(), std::memory_order_relaxed);
    p.iteration.store(t.iteration(), std::memory_order_relaxed);
    heartbeat();
  }
};

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
  const Experiment& stage_experiment(size_t k) const { return e_.stages.empty() ? e_ : e_.stages[k]; }
  size_t stage_count() const { return std::max<size_t>(1, e_.stages.size()); }
  std::unique_ptr<EpochLoop> make_loop(size_t stage);
  /// The newest checkpoint that verifies and loads, as a trainer of its
  /// stage; null when there is none (a fresh start).
  std::unique_ptr<EpochLoop> resume();
  /// Builds and checks every stage after `from_stage` (ConfigError naming
  /// the stage), before anything is written.
  void check_later_stages(size_t from_stage, EpochLoop& trainer);
  /// Refuses (ConfigError) a checkpoint whose manifest records another
  /// configuration than stage `stage` of this experiment, naming both hashes
  /// and the first differing keys, unless only allowed keys changed or
  /// --allow-config-change was given. Returns false when the manifest records
  /// no configuration (written before 1.0, or unreadable): then config.yaml
  /// is compared.
  bool check_checkpoint_belongs(const std::string& checkpoint, size_t stage) const;
  /// The run directory's config.yaml against the experiment (checkpoints
  /// that record no configuration).
  void check_config_changes() const;
  void check_plugin_changes() const;
  /// Whether an unverified checkpoint was evidently complete: its manifest
  /// exists (damaged), or metrics.jsonl shows training went on after it.
  bool evidently_complete(const std::string& checkpoint) const;
  std::unique_ptr<EpochLoop> resume_unverified(const std::vector<std::string>& checkpoints);
  /// The trainer of `checkpoint`'s stage with its state loaded (not hashed
  /// again), after check_checkpoint_belongs. Throws Error when it does not load.
  std::unique_ptr<EpochLoop> load_from(const std::string& checkpoint);
  /// Prints the changes (rank 0); true when one is not allowed on resume and
  /// --allow-config-change was not given.
  bool refused_changes(const std::vector<ConfigChange>& changes, const std::string& since) const;
  /// `network`: the network's facts for provenance.json (plugin, parameters, cost per sample).
  /// `cudnn`: loop.cudnn_benchmark as requested, used, and why.
  void write_run_directory(const nlohmann::ordered_json& network, const nlohmann::ordered_json& cudnn);
  /// Everything after the run directory is written: the stages' training.
  RunOutcome train_stages(std::unique_ptr<EpochLoop>& trainer);
  /// Bad input stopped the run before its first checkpoint: removes the run
  /// directory if this run made it (and puts --fresh's previous one back).
  void undo_new_run_directory();
  void announce_stage(EpochLoop& trainer) const;

  const Experiment& e_;
  const Registry& registry_;
  RunRequest request_;
  std::string run_dir_;
  std::shared_ptr<CheckpointStore> store_;  ///< the run's checkpoints, shared with its trainers
  /// --profile's hook, one for every stage; made (and its window checked) before the session starts.
  std::shared_ptr<HostHook> profiler_;
  std::shared_ptr<HostHook> until_epoch_;  ///< --until-epoch's hook, one for every stage
  std::unique_ptr<Session> session_;       ///< this rank's place in the run
  std::string resumed_from_;
  bool compare_saved_config_ = false;  ///< the resumed checkpoint records no configuration
  size_t stage_ = 0;
  bool made_run_dir_ = false;  ///< this run created the run directory (rank 0)
  std::string kept_previous_;  ///< where --fresh moved the previous run directory
};
}  // namespace

TrainingRun::TrainingRun(const Experiment& experiment, const Registry& registry, RunRequest request,
                         std::string run_dir)
    : e_(experiment),
      registry_(registry),
      request_(std::move(request)),
      run_dir_(std::move(run_dir)),
      store_(std::make_shared<CheckpointStore>(RunPaths(run_dir_).checkpoints, e_.output.keep_checkpoints,
                                               e_.checkpoint.async)),
      profiler_(request_.profile.empty()
                    ? nullptr
                    : profiler_hook(parse_profile_window(request_.profile), RunPaths(run_dir_).profile)),
      until_epoch_(request_.until_epoch > 0 ? std::make_shared<UntilEpoch>(request_.until_epoch) : nullptr),
      session_(std::make_unique<Session>(e_, registry_, run_dir_)) {}

std::unique_ptr<EpochLoop> TrainingRun::make_loop(size_t k) {
  const Experiment& ek = stage_experiment(k);
  // Every stage (the first before anything is written) seeded and checked with one batch.
  std::unique_ptr<EpochLoop> t =
      assemble_stage(ek, session_->context, session_->comm.get(), RunPaths(run_dir_), store_);
  t->set_debug(request_.debug);
  if (!request_.profile.empty()) t->set_profile_skip(parse_profile_window(request_.profile).skip);
  t->set_stop_signal(stop_signal_received);  // the handlers are install_stop_signals()'s, in train_stages()
  t->hooks().add(std::make_shared<WatchedPosition>(), priority::highest);
  if (profiler_) t->hooks().add(profiler_, priority::lowest);        // a step ends after its iteration's other hooks
  if (until_epoch_) t->hooks().add(until_epoch_, priority::lowest);  // after best.pt and the callbacks' after_epoch
  StageInfo info;
  info.index = static_cast<int64_t>(k);
  info.count = static_cast<int64_t>(stage_count());
  info.name = ek.stage_name;
  for (size_t j = 0; j < k; ++j) info.first_epoch += stage_experiment(j).loop.epochs;
  t->set_stage(info);
  return t;
}

std::unique_ptr<EpochLoop> TrainingRun::resume() {
  const Context& context = session_->context;
  if (context.rank == 0) {
    auto stale = store_->remove_stale_temporaries();
    if (!stale.empty())
      InfoLine() << "trainyard: removed " << stale.size()
                 << " leftover file(s) of an interrupted checkpoint write: " << join(stale) << "\n";
  }
  const auto checkpoints = store_->list();
  std::vector<std::string> unverified, failures;
  // Warnings are printed only when the run goes on: a refusal is one error line.
  std::vector<std::string> skipped;
  auto warn_skipped = [&] {
    for (const auto& w : skipped) context.log("warning: " + w + "; trying an older checkpoint");
  };
  for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it) {
    // An incomplete or damaged checkpoint is skipped for the next older one.
    try {
      store_->verify(*it);
    } catch (const Error& err) {
      unverified.push_back(*it);
      skipped.push_back(err.what());
      continue;
    }
    try {
      auto trainer = load_from(*it);  // verified above: hashed once
      warn_skipped();
      return trainer;
    } catch (const ConfigError&) {
      throw;  // a checkpoint of another run: never skipped silently
    } catch (const Error& err) {
      failures.push_back(err.what());
      skipped.push_back(err.what());
    }
  }
  if (!failures.empty())
    throw ConfigError(run_dir_ + ": no checkpoint of this run could be loaded (" + failures.front() + ")",
                      "expected a checkpoint of the same network and optimizer",
                      "run with --fresh to start over (the old run directory is kept)");
  if (unverified.empty()) return nullptr;
  if (request_.accept_unverified) {
    warn_skipped();
    return resume_unverified(unverified);
  }
  // Starting over is right only for a run killed while writing its first
  // checkpoint; progress that evidently existed is never dropped silently.
  if (unverified.size() > 1 || evidently_complete(unverified.front()))
    throw ConfigError(store_->dir() + ": " + std::to_string(unverified.size()) +
                          " checkpoint(s), none with a valid manifest (newest: " + skipped.front() + ")",
                      "expected each checkpoint with its manifest (NAME.pt.manifest.json), as trainyard writes "
                      "them; starting over would lose the run's progress",
                      "run with --accept-unverified-checkpoints to resume from the newest one that loads, or "
                      "--fresh to start over (the old run directory is kept)");
  warn_skipped();
  context.log("warning: the run's only checkpoint was not completely written; starting over");
  return nullptr;
}

std::unique_ptr<EpochLoop> TrainingRun::resume_unverified(const std::vector<std::string>& newest_first) {
  const Context& context = session_->context;
  std::vector<std::string> failures;
  for (const auto& path : newest_first) {
    try {
      auto trainer = load_from(path);  // loading it is the check left
      context.log("warning: --accept-unverified-checkpoints: resuming from " + path + ", which has no valid manifest");
      return trainer;
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& err) {
      failures.push_back(err.what());
    }
  }
  throw ConfigError(store_->dir() + ": none of the " + std::to_string(newest_first.size()) +
                        " unverified checkpoint(s) loads (" + failures.front() + ")",
                    "expected at least one loadable checkpoint", "run with --fresh to start over");
}

std::unique_ptr<EpochLoop> TrainingRun::load_from(const std::string& checkpoint) {
  const CheckpointState peeked = store_->peek(checkpoint);  // which stage to build
  if (peeked.stage < 0 || peeked.stage >= static_cast<int64_t>(stage_count()))
    throw Error(checkpoint + ": checkpoint of stage " + std::to_string(peeked.stage + 1) + ", but the experiment has " +
                std::to_string(stage_count()));
  stage_ = static_cast<size_t>(peeked.stage);
  compare_saved_config_ = !check_checkpoint_belongs(checkpoint, stage_);
  auto trainer = make_loop(stage_);
  trainer->resume(checkpoint, Verify::already_done);
  resumed_from_ = checkpoint;
  return trainer;
}

bool TrainingRun::refused_changes(const std::vector<ConfigChange>& changes, const std::string& since) const {
  if (!changes.empty() && session_->context.rank == 0)
    InfoLine() << "trainyard: the experiment " << since << ":\n" << describe_changes(changes);
  const bool refused = std::any_of(changes.begin(), changes.end(), [](const auto& c) { return !c.allowed; });
  return refused && !request_.allow_config_change;
}

bool TrainingRun::evidently_complete(const std::string& checkpoint) const {
  if (fs::exists(manifest_path(checkpoint))) return true;  // written after the checkpoint: it was complete
  const auto at = position_of_name(checkpoint);
  if (!at) return false;
  for (const auto& event : read_events(RunPaths(run_dir_).metrics))
    if (event.iteration > at->iteration) return true;  // training went on past it
  return false;
}

bool TrainingRun::check_checkpoint_belongs(const std::string& checkpoint, size_t stage) const {
  ManifestRecord recorded;
  try {
    recorded = read_manifest(checkpoint);
  } catch (const Error&) {
    return false;  // no readable manifest (--accept-unverified-checkpoints): nothing recorded
  }
  const nlohmann::ordered_json now = stage_experiment(stage).resolved();
  const std::string hash = resolved_sha256(now);
  if (recorded.config_sha256 == hash) return true;
  if (recorded.config.is_null()) return false;
  // loop.precision auto may choose otherwise on this machine: allowed, and said.
  const auto& was = recorded.config["resolved_precision"];
  if (now.contains("resolved_precision") && was.is_object() &&
      was.value("precision", "") != now["resolved_precision"]["precision"] && session_->context.rank == 0)
    InfoLine() << "trainyard: loop.precision auto: " << fs::path(checkpoint).filename().string() << " was trained in "
               << was.value("precision", "") << "; this machine resumes in "
               << now["resolved_precision"]["precision"].get<std::string>() << " ("
               << now["resolved_precision"]["reason"].get<std::string>() << ")\n";
  const auto changes = ExperimentSnapshot(stage_experiment(stage)).changes_from(recorded.config);
  if (refused_changes(changes,
                      "differs from the one " + fs::path(checkpoint).filename().string() + " was trained with")) {
    std::vector<std::string> first;
    for (const auto& c : changes)
      if (!c.allowed && first.size() < 3) first.push_back(c.key + " " + c.before + " -> " + c.after);
    throw ConfigError(checkpoint + ": belongs to another configuration (its config hash " +
                          recorded.config_sha256.substr(0, 12) + ", this run's " + hash.substr(0, 12) + ")",
                      "expected a checkpoint of this experiment; first differing keys: " + join(first),
                      "run with --allow-config-change to resume anyway, or --fresh to start over (the old run "
                      "directory is kept)");
  }
  return true;
}

void TrainingRun::check_later_stages(size_t from_stage, EpochLoop& trainer) {
  // Later stages are built and checked now, each as make_loop() will build
  // it (its data, network, loss and meters, one batch through them), not
  // after the earlier stages trained and wrote checkpoints. The generators
  // are put back: the stage that trains first draws as if nothing was built.
  const GeneratorStates generators(session_->context.device);
  for (size_t k = from_stage + 1; k < stage_count(); ++k) {
    try {
      check_network_settings(stage_experiment(k).network, trainer.network());
      Context scratch = session_->context;  // building sets its dataset info: the session's stays as it is
      const Components built = build_checked(stage_experiment(k), scratch);
      check_weights_carry_over(*built.network.object, trainer.network(), from_stage);
    } catch (const ConfigError& err) {
      throw ConfigError("stage " + std::to_string(k + 1) + " '" + stage_experiment(k).stage_name + "': " + err.what());
    }
  }
}

void TrainingRun::check_config_changes() const {
  // A resumed run continues the same experiment: more epochs, yes; another
  // learning rate or network, only when asked (the differences are printed).
  const std::string saved_config = (fs::path(run_dir_) / "config.yaml").string();
  if (resumed_from_.empty() || !compare_saved_config_ || !fs::exists(saved_config)) return;
  if (refused_changes(ExperimentSnapshot(e_).changes_since(saved_config), "changed since this run's config.yaml"))
    throw ConfigError(saved_config + ": resuming with changed settings (listed above)",
                      "expected the same experiment; only the loop's length (loop.epochs), logging and input "
                      "threads may change on resume",
                      "run with --allow-config-change to resume anyway, or --fresh to start over");
}

void TrainingRun::check_plugin_changes() const {
  if (resumed_from_.empty()) return;
  std::vector<std::string> changed;
  try {
    changed = changed_plugin_libraries(run_dir_, plugin_libraries_of(e_));
  } catch (const ConfigError& err) {
    if (!request_.allow_plugin_change) throw;
    if (session_->context.rank == 0)
      log_warning("warning: --allow-plugin-change: resuming without the changed-plugin check: " +
                  std::string(err.what()));
    return;
  }
  if (changed.empty()) return;
  if (!request_.allow_plugin_change)
    throw ConfigError(run_dir_ + "/provenance.json: resuming with plugin code that changed since the run started (" +
                          join(changed) + ")",
                      "expected the plugin libraries the run started with (same build fingerprint and same content)",
                      "run with --allow-plugin-change to resume with the new code, or --fresh to start over");
  if (session_->context.rank == 0)
    for (const auto& c : changed)
      log_warning("warning: --allow-plugin-change: resuming with changed plugin code: " + c);
}

void TrainingRun::write_run_directory(const nlohmann::ordered_json& network, const nlohmann::ordered_json& cudnn) {
  if (request_.fresh && fs::exists(run_dir_)) {
    std::string kept = run_dir_ + ".replaced-" + timestamp();
    for (int n = 2; fs::exists(kept); ++n) kept = run_dir_ + ".replaced-" + timestamp() + "-" + std::to_string(n);
    fs::rename(run_dir_, kept);
    kept_previous_ = kept;
    InfoLine() << "trainyard: --fresh: previous run kept in " << kept << "\n";
  }
  made_run_dir_ = !fs::exists(run_dir_);
  fs::create_directories(run_dir_);
  write_file_atomic((fs::path(run_dir_) / "config.yaml").string(), ExperimentSnapshot(e_).yaml());
  write_file_atomic((fs::path(run_dir_) / "config.json").string(), ExperimentSnapshot(e_).json());
  nlohmann::ordered_json provenance = provenance_json(request_.command_line, registry_, session_->world.world_size);
  provenance["precision"] = {{"requested", e_.loop.precision},
                             {"used", e_.loop.effective_precision()},
                             {"reason", e_.loop.precision_reason.empty() ? "as written" : e_.loop.precision_reason}};
  provenance["cudnn_benchmark"] = cudnn;
  provenance["network"] = network;
  record_provenance(run_dir_, provenance);
}

void TrainingRun::undo_new_run_directory() {
  if (session_->context.rank != 0 || !made_run_dir_ || !store_->list().empty()) return;
  std::error_code ec;
  fs::remove_all(run_dir_, ec);
  if (!ec && !kept_previous_.empty()) fs::rename(kept_previous_, run_dir_, ec);
  if (ec) log_warning("warning: " + run_dir_ + ": could not undo this run's new run directory: " + ec.message());
}

void TrainingRun::announce_stage(EpochLoop& trainer) const {
  if (stage_count() > 1)
    InfoLine() << "trainyard: stage " << stage_ + 1 << "/" << stage_count() << " '" << trainer.stage().name
               << "': epochs " << trainer.stage().first_epoch + 1 << "-" << trainer.epochs() << ", optimizer "
               << stage_experiment(stage_).optimizer.plugin << ", " << parameter_count(trainer.network()).second
               << " trainable parameters\n";
}

RunOutcome TrainingRun::run() {
  const Context& context = session_->context;
  Communicator* comm = session_->comm.get();
  // A write past a file size limit fails with EFBIG (and is reported) instead of killing the process.
  ::signal(SIGXFSZ, SIG_IGN);
  if (comm) check_shared_output(*comm, context.rank, fs::path(run_dir_).parent_path());
  // One run per run directory, held until this run ends (a second one stops here).
  const std::unique_ptr<RunLock> lock = take_run_lock(comm, context.rank, run_dir_);
  // Resume before writing anything: a checkpoint that does not fit is bad input.
  if (!request_.fresh && context.rank == 0) check_run_directory_writable(run_dir_);
  std::unique_ptr<EpochLoop> trainer = request_.fresh ? nullptr : resume();
  if (!trainer) stage_ = 0, trainer = make_loop(0);
  check_later_stages(stage_, *trainer);
  const auto [params, trainable] = parameter_count(trainer->network());
  if (comm) {
    // Same weights everywhere: the same checkpoint, then rank 0's tensors.
    comm->check_same("checkpoint to resume from", fs::path(resumed_from_).filename().string(),
                     "expected every rank to find the same checkpoints in the shared run directory",
                     "a checkpoint written or removed while the ranks started, or a network file system that "
                     "shows rank 0's files late: compare " +
                         run_dir_ + "/checkpoints on each machine",
                     /*show_values=*/true);
    comm->broadcast_module(*trainer->network_module());
  }
  check_config_changes();
  check_plugin_changes();
  // What the network costs per sample (train/complexity.h), for provenance.json: rank 0 writes it.
  nlohmann::ordered_json network = {{"plugin", e_.network.plugin}, {"parameters", params}, {"trainable", trainable}};
  if (context.rank == 0) {
    std::string why;
    if (const auto cost = try_network_cost(stage_experiment(stage_).loop, stage_experiment(stage_).seed,
                                           trainer->components(), context, why)) {
      network["forward_flops_per_sample"] = cost->flops;
      network["activation_bytes_per_sample"] = cost->activation_bytes;
    } else {
      network["cost_not_measured"] = why;
    }
  }
  const std::string& cudnn_setting = stage_experiment(stage_).loop.cudnn_benchmark;
  const CudnnBenchmark cudnn = cudnn_benchmark_choice(cudnn_setting, context);
  const nlohmann::ordered_json cudnn_record = {
      {"requested", cudnn_setting}, {"used", cudnn.on}, {"reason", cudnn.reason}};
  on_rank0(comm, context.rank, "run directory", e_.loop.stall_timeout_secs,
           [&] { write_run_directory(network, cudnn_record); });
  try {
    return train_stages(trainer);
  } catch (const ConfigError&) {
    // Bad input found while training (a label out of range in a dataset that
    // cannot list its labels up front) before the first checkpoint: the run
    // directory this run made goes, and --fresh's previous one comes back.
    undo_new_run_directory();
    throw;
  }
}

RunOutcome TrainingRun::train_stages(std::unique_ptr<EpochLoop>& trainer) {
  const Context& context = session_->context;
  const World& world = session_->world;
  Communicator* comm = session_->comm.get();
  const auto [params, trainable] = parameter_count(trainer->network());
  // Every rank's whole log, in the run directory (the console shows rank 0's).
  log_to_file((fs::path(run_dir_) / (context.rank == 0 ? std::string("trainyard.log")
                                                       : "trainyard-rank" + std::to_string(context.rank) + ".log"))
                  .string());
  if (world.distributed())
    InfoLine() << "trainyard: rank " << world.rank << " of " << world.world_size << " (launched by "
               << world.launched_by << "; " << comm->transport() << ")\n";

  RunOutcome outcome;
  outcome.run_dir = run_dir_;
  for (size_t k = 0; k < stage_count(); ++k) outcome.total_epochs += stage_experiment(k).loop.epochs;
  InfoLine() << "trainyard: " << e_.name << ": network " << e_.network.plugin << " (" << params << " parameters, "
             << trainable << " trainable), " << count_of(at::get_num_threads(), "thread") << ", run directory "
             << run_dir_ << "\n";
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
  if (!resumed_from_.empty()) {
    auto at = trainer->position_state();
    InfoLine() << "trainyard: resuming from " << resumed_from_ << " (epoch " << at.epoch << " done, iteration "
               << at.iteration
               << (stage_count() > 1 ? ", stage " + std::to_string(stage_ + 1) + " '" + trainer->stage().name + "'"
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
  auto run_stage = [&](EpochLoop& loop) {
    announce_stage(loop);
    const LoopConfig& limits = stage_experiment(stage_).loop;
    at::globalContext().setBenchmarkCuDNN(cudnn_benchmark_choice(limits.cudnn_benchmark, context).on);
    StallWatchdog watchdog({limits.stall_timeout_secs, limits.stop_grace_secs,
                            (fs::path(run_dir_) / ("stall-rank" + std::to_string(context.rank) + ".txt")).string()});
    loop.run();
  };
  run_stage(*trainer);
  // Later stages start from the weights the previous one ended with, with their own optimizer.
  while (stage_ + 1 < stage_count() && !trainer->ended_by_request()) {
    std::unique_ptr<EpochLoop> next;
    try {
      next = make_loop(++stage_);
    } catch (const ConfigError& err) {
      throw ConfigError("stage " + std::to_string(stage_ + 1) + " '" + stage_experiment(stage_).stage_name +
                        "': " + err.what());
    }
    next->continue_from(*trainer);
    trainer = std::move(next);
    run_stage(*trainer);
  }
  // What each rank's process holds on which GPU (a rank on another rank's GPU shows here).
  if (context.device.is_cuda())
    InfoLine() << "trainyard: rank " << context.rank << " peak GPU memory: " << gpu_memory_peaks() << "\n";
  outcome.epochs_done = trainer->epoch();
  outcome.iteration = trainer->iteration();
  outcome.values = trainer->values();
  outcome.stopped_by_signal = trainer->stopped_by_signal();
  const RunPaths paths(run_dir_);
  if (context.rank == 0 && e_.output.report && fs::exists(paths.metrics))
    outcome.report = write_report(run_dir_, e_.output.plots);
  return outcome;
}

RunOutcome Runner::train(const RunRequest& request) const {
  return TrainingRun(experiment_, registry_, request, run_directory(request.output_dir)).run();
}

}  // namespace trainyard::host
