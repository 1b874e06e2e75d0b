#pragma once
// The experiment: plain typed data, validated against the host's and the
// plugins' schemas before anything runs, plus where each key was written
// (for messages). The YAML itself stays inside host/config/.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/sections.h"
#include "plugins/registry.h"
#include "trainyard/options.h"

namespace trainyard::host {

namespace detail {
struct Document;
}

/// The experiment file as read, with --set applied; only validate_experiment
/// and experiment_plugin_dirs look inside.
struct ExperimentSource {
  std::string path;
  std::shared_ptr<const detail::Document> document;
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
  std::string key;    ///< "network", "dataset.train", "meters[1]"
  std::string where;  ///< file:line:col of the entry
  std::string plugin;
  Options options;
  const Component* component = nullptr;
  std::string crash_label;       ///< "network 'mlp' (network) from libmlp.so", for the fatal-signal report
  int64_t priority = 0;          ///< callbacks
  std::optional<int64_t> order;  ///< overrides
  std::vector<std::string> phases{"train", "test"};  ///< meters
  std::string pretrained;                            ///< network
  /// network.pretrained_rename: key prefixes of the pretrained file replaced
  /// before matching ({"module.": "", "fc.": "head."}), longest first.
  std::vector<std::pair<std::string, std::string>> pretrained_rename;
  bool skip_bad_records = false;             ///< datasets: on_bad_record: skip
  double max_bad_fraction = 0.05;            ///< datasets: with skip, the share of an epoch that may be bad
  std::string trainable;                     ///< network: only names matching this regex train
  std::vector<std::string> freeze;           ///< network: submodule paths kept fixed (and in eval mode)
  std::string memory_format = "contiguous";  ///< network: contiguous | channels_last (4-d weights and inputs)
  std::vector<ParamGroupSpec> param_groups;  ///< optimizer
  bool exempt_norm_and_bias = false;         ///< optimizer: no weight decay on 1-d parameters
};

struct Experiment {
  std::string path;  ///< the experiment file
  /// Key path ("loop.epochs", "meters[1].k") -> "FILE:LINE:COL", or
  /// "--set KEY=VALUE" for a key given on the command line.
  std::map<std::string, std::string> locations;
  std::string name;
  uint64_t seed = 0;
  std::vector<std::string> plugin_dirs;
  ComponentConfig train_data, test_data, network, loss, optimizer;
  std::vector<ComponentConfig> meters, callbacks, overrides;
  LoopConfig loop;
  DistributedConfig distributed;
  OutputConfig output;
  CheckpointConfig checkpoint;
  ScheduleConfig schedule;
  StoppingConfig stopping;
  EmaConfig ema;
  std::map<std::string, std::string> extra;  ///< flattened `extra:` section
  nlohmann::ordered_json extra_as_written;   ///< the `extra:` section itself (resolved() shows it)

  /// Multi-stage runs (`stages:`): each stage's whole experiment, the base
  /// with every earlier stage's keys and then its own merged over it. Empty
  /// for a one-stage run. A stage's own `stage_name` is set; the base's is "".
  std::vector<Experiment> stages;
  std::string stage_name;
  /// Stage k's whole experiment (0-based, std::out_of_range past the last);
  /// a one-stage run's is the experiment itself.
  const Experiment& stage(size_t k) const { return stages.empty() ? *this : stages.at(k); }
  /// 1 for a one-stage run.
  size_t stage_count() const { return stages.empty() ? 1 : stages.size(); }
  nlohmann::ordered_json stages_as_written;  ///< `stages:` as written (resolved() shows it), or null

  /// "FILE:LINE:COL: key.path" for a key from the file, "--set KEY=VALUE:
  /// key.path" for one set on the command line; for an absent key, the
  /// nearest written parent's position, or "FILE: key.path".
  std::string where(const std::string& key_path) const;

  /// The experiment with every default filled in, paths absolute (plugin
  /// folders, path options, the plugin libraries): config.yaml and
  /// config.json of a run, itself a valid experiment.
  nlohmann::ordered_json resolved() const;
};

/// Validates the whole experiment against the registry. Throws ConfigError
/// naming file:line:col and key for the first problem found.
Experiment validate_experiment(ExperimentSource source, const Registry& registry);

/// Options for a component built outside an experiment (`trainyard predict`):
/// `values`, then the YAML flow map `yaml_flow_map` (e.g. "{mean: [0.286]}",
/// may be empty) over them, checked against `schema` as options in a file
/// are. Errors name `what` (e.g. "--input-options").
Options component_options(const Schema& schema, std::map<std::string, Value> values, const std::string& yaml_flow_map,
                          const std::string& what);

}  // namespace trainyard::host
