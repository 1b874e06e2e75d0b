#include "run/resume_choice.h"

#include <algorithm>
#include <filesystem>

#include "config/config_diff.h"
#include "config/snapshot.h"
#include "formats/metrics.h"
#include "formats/run_paths.h"
#include "log/log.h"
#include "run/provenance.h"
#include "train/checkpoint_store.h"
#include "train/epoch_loop.h"
#include "trainyard/error.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

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

ResumeChoice::ResumeChoice(const Experiment& experiment, const RunRequest& request, const Context& context,
                           CheckpointStore& store, std::string run_dir, MakeLoop make_loop)
    : e_(experiment),
      request_(request),
      context_(context),
      store_(store),
      run_dir_(std::move(run_dir)),
      make_loop_(std::move(make_loop)) {}

ResumePoint ResumeChoice::choose() {
  const Context& context = context_;
  if (context.rank == 0) {
    auto stale = store_.remove_stale_temporaries();
    if (!stale.empty())
      InfoLine() << "trainyard: removed " << stale.size()
                 << " leftover file(s) of an interrupted checkpoint write: " << join(stale) << "\n";
  }
  const auto checkpoints = store_.list();
  std::vector<std::string> unverified, failures;
  // Warnings are printed only when the run goes on: a refusal is one error line.
  std::vector<std::string> skipped;
  auto warn_skipped = [&] {
    for (const auto& w : skipped) context.log("warning: " + w + "; trying an older checkpoint");
  };
  for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it) {
    // An incomplete or damaged checkpoint is skipped for the next older one.
    try {
      store_.verify(*it);
    } catch (const Error& err) {
      unverified.push_back(*it);
      skipped.push_back(err.what());
      continue;
    }
    try {
      ResumePoint point = load_from(*it);  // verified above: hashed once
      warn_skipped();
      return point;
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
  if (unverified.empty()) return {};
  if (request_.accept_unverified) {
    warn_skipped();
    return load_unverified(unverified);
  }
  // Starting over is right only for a run killed while writing its first
  // checkpoint; progress that evidently existed is never dropped silently.
  if (unverified.size() > 1 || evidently_complete(unverified.front()))
    throw ConfigError(store_.dir() + ": " + std::to_string(unverified.size()) +
                          " checkpoint(s), none with a valid manifest (newest: " + skipped.front() + ")",
                      "expected each checkpoint with its manifest (NAME.pt.manifest.json), as trainyard writes "
                      "them; starting over would lose the run's progress",
                      "run with --accept-unverified-checkpoints to resume from the newest one that loads, or "
                      "--fresh to start over (the old run directory is kept)");
  warn_skipped();
  context.log("warning: the run's only checkpoint was not completely written; starting over");
  return {};
}

ResumePoint ResumeChoice::load_unverified(const std::vector<std::string>& newest_first) {
  const Context& context = context_;
  std::vector<std::string> failures;
  for (const auto& path : newest_first) {
    try {
      ResumePoint point = load_from(path);  // loading it is the check left
      context.log("warning: --accept-unverified-checkpoints: resuming from " + path + ", which has no valid manifest");
      return point;
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& err) {
      failures.push_back(err.what());
    }
  }
  throw ConfigError(store_.dir() + ": none of the " + std::to_string(newest_first.size()) +
                        " unverified checkpoint(s) loads (" + failures.front() + ")",
                    "expected at least one loadable checkpoint", "run with --fresh to start over");
}

ResumePoint ResumeChoice::load_from(const std::string& checkpoint) {
  const CheckpointState peeked = store_.peek(checkpoint);  // which stage to build
  if (peeked.stage < 0 || peeked.stage >= static_cast<int64_t>(e_.stage_count()))
    throw Error(checkpoint + ": checkpoint of stage " + std::to_string(peeked.stage + 1) + ", but the experiment has " +
                std::to_string(e_.stage_count()));
  ResumePoint point;
  point.stage = static_cast<size_t>(peeked.stage);
  point.config_unrecorded = !belongs_to_run(checkpoint, point.stage);
  point.loop = make_loop_(point.stage);
  point.loop->resume(checkpoint, Verify::already_done);
  point.checkpoint = checkpoint;
  return point;
}

bool ResumeChoice::refused_changes(const std::vector<ConfigChange>& changes, const std::string& since) const {
  if (!changes.empty() && context_.rank == 0)
    InfoLine() << "trainyard: the experiment " << since << ":\n" << describe_changes(changes);
  const bool refused = std::any_of(changes.begin(), changes.end(), [](const auto& c) { return !c.allowed; });
  return refused && !request_.allow_config_change;
}

bool ResumeChoice::evidently_complete(const std::string& checkpoint) const {
  if (store_.has_manifest(checkpoint)) return true;  // written after the checkpoint: it was complete
  const auto at = position_of_name(checkpoint);
  if (!at) return false;
  for (const auto& event : read_events(RunPaths(run_dir_).metrics))
    if (event.iteration > at->iteration) return true;  // training went on past it
  return false;
}

bool ResumeChoice::belongs_to_run(const std::string& checkpoint, size_t stage) const {
  ManifestRecord recorded;
  try {
    recorded = store_.manifest(checkpoint);
  } catch (const Error&) {
    return false;  // no readable manifest (--accept-unverified-checkpoints): nothing recorded
  }
  const nlohmann::ordered_json now = e_.stage(stage).resolved();
  const std::string hash = resolved_sha256(now);
  if (recorded.config_sha256 == hash) return true;
  if (recorded.config.is_null()) return false;
  // loop.precision auto may choose otherwise on this machine: allowed, and said.
  const auto& was = recorded.config["resolved_precision"];
  if (now.contains("resolved_precision") && was.is_object() &&
      was.value("precision", "") != now["resolved_precision"]["precision"] && context_.rank == 0)
    InfoLine() << "trainyard: loop.precision auto: " << fs::path(checkpoint).filename().string() << " was trained in "
               << was.value("precision", "") << "; this machine resumes in "
               << now["resolved_precision"]["precision"].get<std::string>() << " ("
               << now["resolved_precision"]["reason"].get<std::string>() << ")\n";
  const auto changes = ExperimentSnapshot(e_.stage(stage)).changes_from(recorded.config);
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

void ResumeChoice::check_changes(const ResumePoint& point) const {
  if (point.checkpoint.empty()) return;
  if (point.config_unrecorded) check_config_changes();
  check_plugin_changes();
}

void ResumeChoice::check_config_changes() const {
  // A resumed run continues the same experiment: more epochs, yes; another
  // learning rate or network, only when asked (the differences are printed).
  const std::string saved_config = (fs::path(run_dir_) / "config.yaml").string();
  if (!fs::exists(saved_config)) return;
  if (refused_changes(ExperimentSnapshot(e_).changes_since(saved_config), "changed since this run's config.yaml"))
    throw ConfigError(saved_config + ": resuming with changed settings (listed above)",
                      "expected the same experiment; only the loop's length (loop.epochs), logging and input "
                      "threads may change on resume",
                      "run with --allow-config-change to resume anyway, or --fresh to start over");
}

void ResumeChoice::check_plugin_changes() const {
  std::vector<std::string> changed;
  try {
    changed = changed_plugin_libraries(run_dir_, plugin_libraries_of(e_));
  } catch (const ConfigError& err) {
    if (!request_.allow_plugin_change) throw;
    if (context_.rank == 0)
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
  if (context_.rank == 0)
    for (const auto& c : changed)
      log_warning("warning: --allow-plugin-change: resuming with changed plugin code: " + c);
}

}  // namespace trainyard::host
