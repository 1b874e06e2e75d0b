#pragma once
// The experiment file: parsing, --set overrides, and validation of every
// section against the host's and the plugins' schemas, before anything runs.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "plugins/registry.h"
#include "train/schedule.h"
#include "trainyard/options.h"

namespace trainyard::host {

/// The YAML as read, with --set applied, and what is needed to point at a line.
struct ExperimentSource {
  std::string path;
  YAML::Node root;
  std::map<std::string, std::string> set_origins;  ///< key path -> "--set KEY=VALUE"

  /// "FILE:LINE:COL: KEY" for a node read from the file, "--set KEY=VALUE: KEY" for one set.
  std::string where(const YAML::Node& node, const std::string& key) const;
};

/// Reads and parses the file and applies --set KEY=VALUE. Throws ConfigError
/// for syntax errors (file:line:col) and --set through a key that does not
/// exist; a new last key is allowed here and checked against the schema by
/// validate_experiment (its error then names the --set).
ExperimentSource read_experiment(const std::string& path, const std::vector<std::string>& sets);

/// plugin_dirs from the file, made absolute relative to the file's folder.
std::vector<std::string> experiment_plugin_dirs(const ExperimentSource& source);

/// optimizer.param_groups entry: parameters whose name matches `match`
/// (a regex, searched) train with lr * lr_mult and, if given, weight_decay.
struct ParamGroupSpec {
  std::string match;
  double lr_mult = 1.0;
  std::optional<double> weight_decay;
  std::string where;
};

/// One component entry: `plugin:` plus its options, plus host keys.
struct ComponentConfig {
  Kind kind = Kind::dataset;
  std::string key;       ///< "network", "dataset.train", "meters[1]"
  std::string where;     ///< file:line:col of the entry
  std::string plugin;
  Options options;
  const Component* component = nullptr;
  int64_t priority = 0;                                 ///< callbacks
  std::optional<int64_t> order;                         ///< overrides
  std::vector<std::string> phases{"train", "test"};     ///< meters
  std::string pretrained;                               ///< network
  bool skip_bad_records = false;                        ///< datasets: on_bad_record: skip
  std::string trainable;                                ///< network: only names matching this regex train
  std::vector<std::string> freeze;                      ///< network: submodule paths kept fixed (and in eval mode)
  std::string memory_format = "contiguous";             ///< network: contiguous | channels_last (4-d weights and inputs)
  std::vector<ParamGroupSpec> param_groups;             ///< optimizer
  bool exempt_norm_and_bias = false;                    ///< optimizer: no weight decay on 1-d parameters
};

struct LoopConfig {
  int64_t epochs = 1;
  int64_t batch_per_device = 64;
  int64_t test_batch_per_device = 0;  ///< 0: batch_per_device
  int64_t train_samples_per_epoch = 0;  ///< 0: one pass over the training set
  int64_t test_every_iters = 0;         ///< 0: only at the end of each epoch
  int64_t test_samples = 0;             ///< 0: the whole test set
  bool shuffle = true;
  bool drop_last = false;
  int64_t log_every_iters = 50;
  int64_t checkpoint_every_iters = 0;   ///< 0: only at the end of each epoch
  double checkpoint_every_secs = 0;     ///< also every T seconds of wall time; 0: not by time
  int64_t iter_size = 1;                ///< batches accumulated per optimizer update
  double clip_grad_norm = 0;            ///< 0: no clipping by global norm
  double clip_grad_value = 0;           ///< 0: no clipping by value
  int64_t decode_threads = 0;           ///< 0: decode on the training thread
  int64_t prefetch_batches = 4;
  std::string nonfinite = "error";      ///< error | skip | ignore: a NaN/inf loss or gradient
  int64_t nonfinite_max_skips = 10;     ///< skip: in a row, before stopping as with error
  std::vector<std::string> stop_signals{"SIGINT", "SIGTERM", "SIGUSR1"};  ///< stop with a checkpoint, exit 4
  std::string precision = "fp32";       ///< fp32 | bf16-mixed | fp16-mixed (autocast; fp16 with loss scaling)
};

struct DistributedConfig {
  int64_t num_gpus = 0;
  int64_t num_cpus = 1;  ///< CPU processes when num_gpus is 0
  int64_t first_gpu_id = 0;
  int64_t threads_per_process = 0;  ///< 0: the node's cores shared by its processes
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;
  std::string rendezvous = "tcp";
  std::string rendezvous_file;
  int64_t timeout_secs = 60;
  int64_t bucket_mb = 25;
  bool sync_batch_norm = false;
};

struct StoppingConfig {
  std::string target_meter;   ///< stop once this meter reaches `target`
  double target = 0;
  std::string monitor;        ///< early stopping and best.pt follow this meter
  int64_t patience = 0;       ///< epochs without improvement before stopping; 0: never
  double min_delta = 0;       ///< smaller changes are not improvements
  bool keep_best = true;      ///< checkpoints/best.pt: the best epoch by `monitor`
  std::string mode = "auto";  ///< max | min | auto (min for names with "loss")
};

/// output.plots entry (Playground's plots): one chart of meter values.
struct PlotSpec {
  std::string title;
  std::string x = "iteration";    ///< iteration | epoch
  std::vector<std::string> ys;    ///< value names: train_loss, test_accuracy_top1, lr, ...
};

struct OutputConfig {
  std::string dir = "runs";
  int64_t keep_checkpoints = 3;  ///< 0: keep all
  std::vector<PlotSpec> plots;   ///< empty: the default plots (loss, accuracy, learning rate)
  bool report = true;            ///< report.html and plots/ at the end of a run
};

struct Experiment {
  ExperimentSource source;
  std::string name;
  uint64_t seed = 0;
  std::vector<std::string> plugin_dirs;
  ComponentConfig train_data, test_data, network, loss, optimizer;
  std::vector<ComponentConfig> meters, callbacks, overrides;
  LoopConfig loop;
  DistributedConfig distributed;
  OutputConfig output;
  ScheduleConfig schedule;
  StoppingConfig stopping;
  std::map<std::string, std::string> extra;  ///< flattened `extra:` section

  /// Multi-stage runs (`stages:`): each stage's whole experiment, the base
  /// with every earlier stage's keys and then its own merged over it. Empty
  /// for a one-stage run. A stage's own `stage_name` is set; the base's is "".
  std::vector<Experiment> stages;
  std::string stage_name;

  /// The experiment with every default filled in (config.yaml / config.json).
  YAML::Node resolved() const;
};

/// Validates the whole experiment against the registry. Throws ConfigError
/// naming file:line:col and key for the first problem found.
Experiment validate_experiment(ExperimentSource source, const Registry& registry);

/// The host's own sections, as schemas (for validation and documentation).
const Schema& loop_schema();
const Schema& distributed_schema();
const Schema& output_schema();
const Schema& stopping_schema();

/// Checks `map` against `schema` (skipping `host_keys`) and returns the values
/// with defaults filled in. `key` is the map's key path, for messages.
Options validate_options(const ExperimentSource& source, const YAML::Node& map, const std::string& key,
                         const Schema& schema, const std::vector<std::string>& host_keys,
                         const std::string& owner);

}  // namespace trainyard::host
