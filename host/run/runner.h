#pragma once
// The launch modes: the one class every command on an experiment goes
// through (train, validate, eval, predict, export, embed, search, find-lr,
// dry runs, iterate), and what `trainyard run` asks and gets back. Commands
// only parse flags into a request, call the Runner's method and map the
// outcome to an exit code. A new mode: docs/architecture.md, "Where a new
// launch mode goes".
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "config/experiment.h"
#include "plugins/registry.h"
#include "run/mode_requests.h"
#include "trainyard/loop.h"

namespace trainyard::host {

struct LoadedModel;

/// What `trainyard run` asks: where the run directory is and how to resume.
struct RunRequest {
  std::string output_dir;            ///< folder of run directories; "" for output.dir
  bool fresh = false;                ///< start over; the old run directory is kept, renamed
  bool allow_config_change = false;  ///< resume although settings other than the loop's length changed
  /// Resume from checkpoints whose manifests are missing or unreadable, once
  /// one of them loads (otherwise such checkpoints are refused, never dropped).
  bool accept_unverified = false;
  /// Resume although a plugin library the run uses changed content since the
  /// run started (its SHA-256 in provenance.json differs).
  bool allow_plugin_change = false;
  bool debug = false;  ///< stop at the first non-finite value, naming where it came from
  /// --until-epoch N: stop (resumably, with a checkpoint) once N epochs are
  /// done, the schedule still that of loop.epochs; 0: train them all.
  int64_t until_epoch = 0;
  /// --profile A:B: a Kineto trace of train iterations A+1..B of this process
  /// in RUN_DIR/profile/ (train/profiler.h); "" for none.
  std::string profile;
  std::vector<std::string> command_line;  ///< for provenance.json
};

/// Throws ConfigError naming --profile when `window` is not A:B (0 <= A < B)
/// or B: checked before any process is launched.
void check_profile_window(const std::string& window);

/// What a training run ended with.
struct RunOutcome {
  std::string run_dir;
  int64_t epochs_done = 0, total_epochs = 0;
  MeterValues values;              ///< the last values of the last stage
  int64_t iteration = 0;           ///< where the run stands
  bool stopped_by_signal = false;  ///< resumable: the same command continues it
  std::string report;              ///< report.html, when written
};

/// The launch modes of one experiment: every `trainyard` command that works
/// on an experiment makes a Runner and calls the method of its mode. Each
/// mode's body is in the file of its job: train in run/training_run.cpp;
/// evaluate, predict and export_network in run/model.cpp; embed and search in
/// run/catalog.cpp; dry_run, validate, value_names and iterate in
/// run/inspect.cpp; find_lr in run/lr_finder.cpp.
///
/// Example:
///   Registry registry;
///   const Experiment e = load_experiment(file, sets, plugin_dirs, registry);
///   const Runner runner(e, registry);
///   const RunOutcome outcome = runner.train(request);
class Runner {
 public:
  /// `experiment` and `registry` must outlive the Runner. The whole
  /// experiment: the modes read every part of it (its stages, output,
  /// distributed and loop sections, the plugins' configs).
  Runner(const Experiment& experiment, const Registry& registry) : experiment_(experiment), registry_(registry) {}

  /// `trainyard run`: trains every stage from where the run stands, joining
  /// the process group in a data-parallel run. Throws ConfigError for a run
  /// that must not go on (a foreign checkpoint, a refused config change).
  RunOutcome train(const RunRequest& request) const;

  /// `trainyard validate`: builds every stage as a run would (components and
  /// one batch through them) and writes what it built to `out`: datasets and
  /// their sizes, the network's parameters, each stage's optimizer groups and
  /// what is frozen. Throws ConfigError naming the stage that failed.
  void validate(std::ostream& out) const;
  /// `run --dry-run`: one process, no run directory: the components of the
  /// first stage built, one train and one test batch run; the report and the
  /// parameter groups.
  std::string dry_run() const;
  /// The names of the values a run reports (train_*, test_*, lr, ...): the
  /// components built on the CPU and one batch put through them, as validate
  /// does, nothing written. For checking a name (a sweep's --metric) before
  /// anything trains.
  std::vector<std::string> value_names() const;
  /// `trainyard iterate`: draws epoch 0's training batches as a run would,
  /// `batch_limit` of them (0: the whole epoch), no network.
  IterateResult iterate(int64_t batch_limit) const;

  /// `trainyard eval`: the test meters over the test split (else the train
  /// split) on the checkpoint's weights, in the stage the checkpoint belongs
  /// to. `weights`: trained, or ema (the `ema:` average the checkpoint holds).
  MeterValues evaluate(const std::string& checkpoint, const std::string& weights = "trained") const;
  /// `trainyard predict`: one CSV row per input sample (index, source, label,
  /// top-k classes and probabilities), preprocessed like the test set.
  /// Returns the rows written.
  int64_t predict(const PredictRequest& request) const;
  /// `trainyard export`: writes the checkpoint's network for PyTorch.
  /// state_dict: a file Python's torch.load reads as {name: tensor}, the
  /// names of the network's parameters and buffers (module paths joined by
  /// '.', as nn.Module.state_dict() names them). safetensors: the same
  /// tensors and names in a safetensors file (safetensors.torch.load_file
  /// reads it). torchscript: for a network built from a TorchScript module
  /// (network.plugin: torchscript), that module with the trained values.
  /// Returns the number of tensors written.
  size_t export_network(const ExportRequest& request) const;

  /// `trainyard embed`: writes the catalog folder whole or not at all (built
  /// beside it, then renamed). Returns the number of items.
  int64_t embed(const EmbedRequest& request) const;
  /// `trainyard search`: embeds the queries with the catalog's network,
  /// prints each query's top_k nearest items to `out`, writes
  /// OUTPUT_DIR/search.csv and OUTPUT_DIR/search.html (the query and its
  /// matches as pictures).
  void search(const CatalogInfo& catalog, const SearchRequest& request, std::ostream& out) const;

  /// `trainyard find-lr`: joins the ranks, builds the experiment as a run's
  /// first stage would be, runs the finder and, on rank 0, writes
  /// lr_finder.csv, .svg and .json to `out` (no run directory is touched).
  /// Returns the result on rank 0, nothing on the other ranks.
  std::optional<LrFinderResult> find_lr(const LrFinderOptions& options, const std::string& out) const;

  /// The run directory: OUTPUT_DIR/NAME, OUTPUT_DIR being `output_dir`
  /// (--output-dir) when given, else output.dir.
  std::string run_directory(const std::string& output_dir) const;
  /// The checkpoint a mode reads: `explicit_path` when given (it must
  /// exist), else the latest of the run's checkpoints in `output_dir` (""
  /// for output.dir). Throws ConfigError when there is none.
  std::string checkpoint_to_read(const std::optional<std::string>& explicit_path, const std::string& output_dir) const;

 private:
  /// The checkpoint's stage built (one process) with its weights loaded:
  /// what evaluate, predict, export, embed and search share (run/loaded_model.cpp).
  LoadedModel load_model(const std::string& checkpoint, const std::string& weights = "trained") const;

  const Experiment& experiment_;
  const Registry& registry_;
};

}  // namespace trainyard::host
