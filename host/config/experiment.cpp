#include "config/experiment.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>

#include "trainyard/error.h"
#include "util/process.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

const std::vector<std::string> kTopLevelKeys = {
    "name",     "seed",      "plugin_dirs", "dataset", "network", "loss",   "optimizer", "meters",
    "callbacks", "overrides", "loop",       "distributed", "output", "extra", "resolved_plugins", "schedule",
    "stopping", "stages"};
// What a stage of a multi-stage run may set (the network's architecture and
// the run's plumbing stay; its weights carry over from stage to stage).
const std::vector<std::string> kStageKeys = {"name", "loop", "optimizer", "schedule", "stopping", "network", "dataset"};
const std::vector<std::string> kStageNetworkKeys = {"trainable", "freeze"};
const std::vector<std::string> kSectionMaps = {"dataset", "network", "loss",   "optimizer", "loop",
                                               "distributed", "output", "extra", "schedule", "stopping"};

std::string child_key(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}
std::string index_key(const std::string& parent, size_t i) { return parent + "[" + std::to_string(i) + "]"; }

std::string shown(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsSequence()) return "a list";
  return "a map";
}

std::vector<std::string> map_keys(const YAML::Node& node) {
  std::vector<std::string> keys;
  if (node.IsMap())
    for (const auto& kv : node) keys.push_back(kv.first.Scalar());
  return keys;
}

[[noreturn]] void fail(const std::string& where, const std::string& what, const std::string& expected_got,
                       const std::string& hint = "") {
  throw ConfigError(where + ": " + what, expected_got, hint);
}

// --- scalar conversion --------------------------------------------------------

bool parse_integer(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  out = v;
  return true;
}

bool parse_number(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || std::isnan(v)) return false;
  out = v;
  return true;
}

struct Checker {
  const ExperimentSource& source;
  const OptionSpec& spec;
  const std::string& key;

  std::string bound(double v) const {
    const bool integral = spec.type == OptionType::integer || spec.type == OptionType::integer_list;
    return integral ? std::to_string(static_cast<int64_t>(v)) : to_string(Value(v));
  }
  std::string limits() const {
    if (spec.min_value && spec.max_value) return "between " + bound(*spec.min_value) + " and " + bound(*spec.max_value);
    if (spec.min_value) return "at least " + bound(*spec.min_value);
    return "at most " + bound(*spec.max_value);
  }
  void check_range(const YAML::Node& node, double v) const {
    if ((spec.min_value && v < *spec.min_value) || (spec.max_value && v > *spec.max_value))
      fail(source.where(node, key), "value out of range", "expected " + limits() + ", got " + node.Scalar());
  }
  void check_choice(const YAML::Node& node, const std::string& v) const {
    if (spec.choices.empty()) return;
    for (const auto& c : spec.choices)
      if (c == v) return;
    fail(source.where(node, key), "'" + v + "' is not a valid choice",
         "expected one of " + join(spec.choices) + ", got '" + v + "'", did_you_mean(v, spec.choices));
  }
  [[noreturn]] void wrong(const YAML::Node& node, const std::string& expected) const {
    fail(source.where(node, key), "wrong type", "expected " + expected + ", got " + shown(node),
         spec.description.empty() ? "" : key + " is: " + spec.description);
  }

  bool boolean(const YAML::Node& n) const {
    if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "false")) return n.Scalar() == "true";
    wrong(n, "a boolean (true or false)");
  }
  int64_t integer(const YAML::Node& n) const {
    int64_t v = 0;
    if (!n.IsScalar() || !parse_integer(n.Scalar(), v)) wrong(n, "an integer");
    check_range(n, static_cast<double>(v));
    return v;
  }
  double number(const YAML::Node& n) const {
    double v = 0;
    if (!n.IsScalar() || !parse_number(n.Scalar(), v)) wrong(n, "a number");
    check_range(n, v);
    return v;
  }
  std::string string(const YAML::Node& n) const {
    if (!n.IsScalar()) wrong(n, "a string");
    check_choice(n, n.Scalar());
    return n.Scalar();
  }
  template <class T, class F>
  std::vector<T> list(const YAML::Node& n, const char* what, F each) const {
    if (!n.IsSequence()) wrong(n, std::string("a list of ") + what + " like [1, 2]");
    std::vector<T> out;
    for (const auto& item : n) out.push_back((this->*each)(item));
    return out;
  }

  Value convert(const YAML::Node& n) const {
    switch (spec.type) {
      case OptionType::boolean: return boolean(n);
      case OptionType::integer: return integer(n);
      case OptionType::number: return number(n);
      case OptionType::string: return string(n);
      case OptionType::integer_list: return list<int64_t>(n, "integers", &Checker::integer);
      case OptionType::number_list: return list<double>(n, "numbers", &Checker::number);
      case OptionType::string_list: return list<std::string>(n, "strings", &Checker::string);
    }
    wrong(n, "a value");
  }
};

YAML::Node value_node(const Value& value) {
  switch (type_of(value)) {
    case OptionType::integer_list:
    case OptionType::number_list:
    case OptionType::string_list: {
      YAML::Node seq(YAML::NodeType::Sequence);
      seq.SetStyle(YAML::EmitterStyle::Flow);
      if (auto* v = std::get_if<std::vector<int64_t>>(&value))
        for (auto x : *v) seq.push_back(to_string(Value(x)));
      if (auto* v = std::get_if<std::vector<double>>(&value))
        for (auto x : *v) seq.push_back(to_string(Value(x)));
      if (auto* v = std::get_if<std::vector<std::string>>(&value))
        for (const auto& x : *v) seq.push_back(x);
      return seq;
    }
    default: return YAML::Node(to_string(value));
  }
}

void flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (!node.IsDefined()) return;
  if (node.IsMap()) {
    for (const auto& kv : node) flatten(kv.second, child_key(prefix, kv.first.Scalar()), out);
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) flatten(node[i], child_key(prefix, std::to_string(i)), out);
  } else if (node.IsScalar()) {
    out[prefix] = node.Scalar();
  }
}

}  // namespace

std::string ExperimentSource::where(const YAML::Node& node, const std::string& key) const {
  // The longest key-path prefix that a --set replaced wins.
  for (std::string k = key;;) {
    auto it = set_origins.find(k);
    if (it != set_origins.end()) return it->second + ": " + key;
    size_t cut = k.find_last_of(".[");
    if (cut == std::string::npos) break;
    k = k.substr(0, cut);
  }
  if (node.IsDefined() && !node.Mark().is_null())
    return path + ":" + std::to_string(node.Mark().line + 1) + ":" + std::to_string(node.Mark().column + 1) +
           (key.empty() ? "" : ": " + key);
  return path + (key.empty() ? "" : ": " + key);
}

ExperimentSource read_experiment(const std::string& path, const std::vector<std::string>& sets) {
  ExperimentSource source;
  source.path = path;
  if (!fs::is_regular_file(path))
    throw ConfigError(path + ": experiment file does not exist", "expected a YAML file", "check the path");
  try {
    source.root = YAML::LoadFile(path);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                          ": YAML syntax error: " + e.msg,
                      "expected valid YAML", "fix the line shown");
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ": cannot read: " + e.what(), "expected a readable YAML file", "");
  }
  if (!source.root.IsMap())
    throw ConfigError(path + ": the experiment must be a map of sections",
                      "expected keys like name, dataset, network, got " + shown(source.root),
                      "see docs/experiment-yaml.md");

  for (const auto& set : sets) {
    const std::string origin = "--set " + set;
    size_t eq = set.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError(origin + ": not KEY=VALUE", "expected e.g. --set optimizer.lr=0.1, got '" + set + "'", "");
    const std::string dotted = set.substr(0, eq), text = set.substr(eq + 1);
    YAML::Node value;
    try {
      value = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw ConfigError(origin + ": the value is not valid YAML: " + e.what(), "expected e.g. 0.1, relu or [256, 128]", "");
    }
    if (text.empty() || value.IsNull())
      throw ConfigError(origin + ": empty value", "expected a value after '='", "");

    auto segments = split(dotted, '.');
    YAML::Node current = source.root;
    std::string key;
    for (size_t i = 0; i < segments.size(); ++i) {
      const std::string& seg = segments[i];
      const bool last = i + 1 == segments.size();
      if (seg.empty()) throw ConfigError(origin + ": empty key segment in '" + dotted + "'", "expected a.b.c", "");
      if (current.IsSequence()) {
        int64_t index = -1;
        if (!parse_integer(seg, index) || index < 0 || index >= static_cast<int64_t>(current.size()))
          throw ConfigError(origin + ": " + key + " is a list of " + std::to_string(current.size()) + " entries",
                            "expected an index 0.." + std::to_string(static_cast<int64_t>(current.size()) - 1) +
                                ", got '" + seg + "'",
                            "");
        key = index_key(key, static_cast<size_t>(index));
        if (last) {
          current[static_cast<size_t>(index)] = value;
        } else {
          YAML::Node next = current[static_cast<size_t>(index)];
          current.reset(next);
        }
        continue;
      }
      if (!current.IsMap())
        throw ConfigError(origin + ": " + key + " is " + shown(current) + ", not a map",
                          "expected a key under a map", "");
      const YAML::Node& view = current;
      const std::string here = child_key(key, seg);
      if (last) {
        current[seg] = value;
      } else if (view[seg].IsDefined()) {
        YAML::Node next = current[seg];
        current.reset(next);
      } else if (key.empty() && std::find(kSectionMaps.begin(), kSectionMaps.end(), seg) != kSectionMaps.end()) {
        current[seg] = YAML::Node(YAML::NodeType::Map);
        YAML::Node next = current[seg];
        current.reset(next);
      } else {
        auto keys = key.empty() ? kTopLevelKeys : map_keys(current);
        throw ConfigError(origin + ": key '" + here + "' does not exist",
                          "expected one of " + join(keys) + (key.empty() ? "" : " under " + key) + ", got '" + seg + "'",
                          did_you_mean(seg, keys));
      }
      key = here;
    }
    source.set_origins[key] = origin;
  }
  return source;
}

std::vector<std::string> experiment_plugin_dirs(const ExperimentSource& source) {
  std::vector<std::string> dirs;
  const YAML::Node& root = source.root;
  YAML::Node node = root["plugin_dirs"];
  if (!node.IsDefined() || node.IsNull()) return dirs;
  if (!node.IsSequence())
    fail(source.where(node, "plugin_dirs"), "wrong type", "expected a list of folders, got " + shown(node));
  fs::path base = fs::path(source.path).parent_path();
  for (size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar())
      fail(source.where(node[i], index_key("plugin_dirs", i)), "wrong type", "expected a folder, got " + shown(node[i]));
    fs::path p = node[i].Scalar();
    dirs.push_back((p.is_absolute() ? p : base / p).lexically_normal().string());
  }
  return dirs;
}

Options validate_options(const ExperimentSource& source, const YAML::Node& map, const std::string& key,
                         const Schema& schema, const std::vector<std::string>& host_keys, const std::string& owner) {
  std::vector<std::string> known = host_keys;
  for (const auto& spec : schema.specs()) known.push_back(spec.key);
  if (map.IsDefined() && !map.IsNull() && !map.IsMap())
    fail(source.where(map, key), "wrong type", "expected a map of options, got " + shown(map));
  if (map.IsDefined() && map.IsMap())
    for (const auto& kv : map) {
      const std::string name = kv.first.Scalar();
      if (std::find(known.begin(), known.end(), name) != known.end()) continue;
      std::string hint = closest(name, known);
      fail(source.where(kv.first, child_key(key, name)), "unknown option for " + owner,
           "expected one of " + join(known) + ", got '" + name + "'",
           hint.empty() ? "see 'trainyard describe' for the options" : "did you mean '" + hint + "'?");
    }
  std::map<std::string, Value> values;
  for (const auto& spec : schema.specs()) {
    YAML::Node node = map.IsDefined() && map.IsMap() ? YAML::Node(map[spec.key]) : YAML::Node();
    const std::string option_key = child_key(key, spec.key);
    if (!node.IsDefined() || node.IsNull()) {
      if (spec.required())
        fail(source.where(map, key), "missing required option '" + spec.key + "' for " + owner,
             "expected " + std::string(type_name(spec.type)) + ", got nothing",
             "add " + spec.key + ": (" + spec.description + ")");
      values[spec.key] = *spec.default_value;
      continue;
    }
    values[spec.key] = Checker{source, spec, option_key}.convert(node);
  }
  return Options(std::move(values));
}

namespace {

struct Validator {
  const ExperimentSource& source;
  const Registry& registry;

  YAML::Node get(const YAML::Node& map, const std::string& k) const {
    const YAML::Node& view = map;
    return view[k];
  }

  ComponentConfig component(const YAML::Node& node, const std::string& key, Kind kind,
                            const std::vector<std::string>& host_keys) const {
    ComponentConfig c;
    c.kind = kind;
    c.key = key;
    c.where = source.where(node, key);
    if (!node.IsDefined() || node.IsNull())
      fail(source.where(source.root, key), "missing section '" + key + "'",
           "expected a map with plugin: NAME (known " + kind_plural(kind) + ": " + join(registry.names(kind)) + ")",
           "add " + key + ": {plugin: ...}");
    if (!node.IsMap())
      fail(c.where, "wrong type", "expected a map with plugin: NAME, got " + shown(node));
    YAML::Node plugin = get(node, "plugin");
    if (!plugin.IsDefined() || !plugin.IsScalar())
      fail(source.where(node, key), "missing 'plugin:'",
           "expected the name of a " + std::string(kind_name(kind)) + " (known " + kind_plural(kind) + ": " +
               join(registry.names(kind)) + "), got " + shown(plugin));
    c.plugin = plugin.Scalar();
    try {
      c.component = &registry.get(kind, c.plugin);
    } catch (const ConfigError& e) {
      throw ConfigError(source.where(plugin, child_key(key, "plugin")) + ": " + e.what());
    }
    std::vector<std::string> all_host_keys = host_keys;
    all_host_keys.insert(all_host_keys.begin(), "plugin");
    c.options = validate_options(source, node, key, c.component->schema, all_host_keys,
                                 std::string(kind_name(kind)) + " '" + c.plugin + "'");
    return c;
  }

  std::vector<ComponentConfig> component_list(const std::string& key, Kind kind,
                                              const std::vector<std::string>& host_keys) const {
    std::vector<ComponentConfig> out;
    YAML::Node list = get(source.root, key);
    if (!list.IsDefined() || list.IsNull()) return out;
    if (!list.IsSequence())
      fail(source.where(list, key), "wrong type", "expected a list of entries like - plugin: NAME, got " + shown(list));
    for (size_t i = 0; i < list.size(); ++i) out.push_back(component(list[i], index_key(key, i), kind, host_keys));
    return out;
  }

  Options section(const std::string& key, const Schema& schema) const {
    return validate_options(source, get(source.root, key), key, schema, {}, "section '" + key + "'");
  }

  int64_t host_integer(const YAML::Node& entry, const std::string& entry_key, const std::string& k,
                       int64_t fallback) const {
    YAML::Node n = get(entry, k);
    if (!n.IsDefined()) return fallback;
    int64_t v = 0;
    if (!n.IsScalar() || !parse_integer(n.Scalar(), v))
      fail(source.where(n, child_key(entry_key, k)), "wrong type", "expected an integer, got " + shown(n));
    return v;
  }
};

}  // namespace

const Schema& loop_schema() {
  static const Schema schema = [] {
    Schema s;
    s.add("epochs", 1, "number of epochs to train").min(0);
    s.add("batch_per_device", 64, "training batch size on each device (process)").min(1);
    s.add("test_batch_per_device", 0, "test batch size; 0 uses batch_per_device").min(0);
    s.add("train_samples_per_epoch", 0, "samples per epoch; 0 is one pass over the training set").min(0);
    s.add("test_every_iters", 0, "also test every N train iterations; 0 tests only at epoch end").min(0);
    s.add("test_samples", 0, "test samples per test pass; 0 is the whole test set").min(0);
    s.add("shuffle", true, "draw a new permutation of the training set every epoch from (seed, epoch)");
    s.add("drop_last", false, "drop the last incomplete training batch of an epoch");
    s.add("log_every_iters", 50, "write train meter values to metrics.jsonl every N iterations").min(1);
    s.add("checkpoint_every_iters", 0, "also checkpoint every N train iterations; 0 only at epoch end").min(0);
    s.add("checkpoint_every_secs", 0.0, "also checkpoint every T seconds of wall time (between updates); 0: not by time")
        .min(0.0);
    s.add("iter_size", 1, "batches whose gradients are accumulated into one optimizer update (loss scaled by 1/N)")
        .min(1);
    s.add("clip_grad_norm", 0.0, "scale gradients down to at most this global L2 norm; 0 does not clip").min(0.0);
    s.add("clip_grad_value", 0.0, "clamp every gradient to [-v, v]; 0 does not clip").min(0.0);
    s.add("decode_threads", 0, "threads that read, decode and augment samples; 0 does it on the training thread")
        .range(0, 64);
    s.add("prefetch_batches", 4, "ready batches the decode threads keep ahead of training").range(1, 1024);
    s.add("nonfinite", "error",
          "a NaN or infinite loss or gradient: error (stop before the update, checkpoint, name the cause), skip "
          "(drop that update, count it; stop after nonfinite_max_skips in a row), or ignore")
        .one_of({"error", "skip", "ignore"});
    s.add("stop_signals", std::vector<std::string>{"SIGINT", "SIGTERM", "SIGUSR1"},
          "signals that stop the run at the next iteration with a checkpoint (exit code 4, resumable)")
        .one_of(stop_signal_names());
    s.add("nonfinite_max_skips", 10, "skip: updates dropped in a row before the run stops as with error").min(1);
    s.add("precision", "fp32",
          "fp32; bf16-mixed (autocast to bfloat16: CPUs, and GPUs from compute capability 8.0); fp16-mixed "
          "(autocast to float16 with dynamic loss scaling: GPUs only). Losses, meters and the non-finite check see fp32")
        .one_of({"fp32", "bf16-mixed", "fp16-mixed"});
    return s;
  }();
  return schema;
}

const Schema& distributed_schema() {
  static const Schema schema = [] {
    Schema s;
    s.add("num_gpus", 0, "GPUs to train on; 0 trains on the CPU").min(0);
    s.add("first_gpu_id", 0, "index of the first GPU to use").min(0);
    s.add("num_cpus", 1, "with num_gpus 0: CPU processes to train on (one process each, Gloo between them)")
        .range(1, 1024);
    s.add("threads_per_process", 0, "intra-op CPU threads; 0 shares the node's cores among its processes").min(0);
    s.add("master_addr", "127.0.0.1", "address of rank 0 (the environment's MASTER_ADDR wins)");
    s.add("master_port", 29500, "port of rank 0's store (the environment's MASTER_PORT wins)").range(1, 65535);
    s.add("rendezvous", "tcp", "how ranks find each other: tcp (a store on rank 0) or file (a shared file)")
        .one_of({"tcp", "file"});
    s.add("rendezvous_file", "", "the shared file for rendezvous: file (removed when the run ends cleanly)");
    s.add("timeout_secs", 60, "a rank that does not answer within this time fails the run").range(1, 86400);
    s.add("bucket_mb", 25, "gradients are averaged in flat buckets of about this size").range(1, 4096);
    s.add("sync_batch_norm", false,
          "batch norm statistics over the global batch (networks that use trainyard::SyncBatchNorm2d)");
    return s;
  }();
  return schema;
}

const Schema& stopping_schema() {
  static const Schema schema = [] {
    Schema s;
    s.add("target_meter", "", "stop once this meter reaches target, e.g. test_accuracy_top1 or train_loss");
    s.add("target", 0.0, "the value target_meter must reach (at least, or at most for a minimized meter)");
    s.add("monitor", "", "meter for early stopping and best.pt, e.g. test_loss; empty: neither");
    s.add("patience", 0, "stop after this many epochs without improvement of monitor; 0 never stops early").min(0);
    s.add("min_delta", 0.0, "an improvement must exceed this").min(0.0);
    s.add("keep_best", true, "keep checkpoints/best.pt, the epoch with the best monitor value");
    s.add("mode", "auto", "max, min, or auto (min when the meter name contains 'loss')").one_of({"auto", "max", "min"});
    return s;
  }();
  return schema;
}

const Schema& output_schema() {
  static const Schema schema = [] {
    Schema s;
    s.add("dir", "runs", "folder holding run directories (<dir>/<name>/); relative to the working directory");
    s.add("keep_checkpoints", 3, "how many recent checkpoints to keep; 0 keeps all").min(0);
    s.add("report", true, "write report.html and plots/*.svg in the run directory at the end of a run");
    // `plots:` (a list of {title, x, ys}) is checked by the host, not by this schema.
    return s;
  }();
  return schema;
}

namespace {

// `over` merged into `base`: maps key by key (recursively), anything else
// replaced. A component map whose plugin changes is replaced whole: the old
// plugin's options mean nothing to the new one. Never writes into either
// input (nodes are shared): new maps are made for every merged level.
YAML::Node merged(const YAML::Node& base, const YAML::Node& over) {
  if (!base.IsDefined() || !base.IsMap() || !over.IsMap()) return over;
  if (base["plugin"].IsDefined() && over["plugin"].IsDefined() && over["plugin"].IsScalar() &&
      base["plugin"].IsScalar() && base["plugin"].Scalar() != over["plugin"].Scalar())
    return over;
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& kv : base) out[kv.first.Scalar()] = kv.second;
  for (const auto& kv : over) {
    const std::string k = kv.first.Scalar();
    out[k] = base[k].IsDefined() ? merged(base[k], kv.second) : kv.second;
  }
  return out;
}

void check_stage(const ExperimentSource& src, const YAML::Node& stage, const std::string& key) {
  if (!stage.IsMap())
    fail(src.where(stage, key), "a stage must be a map", "expected {name: ..., loop: ..., optimizer: ...}, got " + shown(stage));
  for (const auto& kv : stage) {
    const std::string k = kv.first.Scalar();
    if (std::find(kStageKeys.begin(), kStageKeys.end(), k) == kStageKeys.end())
      fail(src.where(kv.first, key + "." + k), "a stage cannot set '" + k + "'",
           "expected some of " + join(kStageKeys) + ", got '" + k + "'",
           std::find(kTopLevelKeys.begin(), kTopLevelKeys.end(), k) != kTopLevelKeys.end()
               ? "set '" + k + "' at the top level: it applies to every stage"
               : did_you_mean(k, kStageKeys));
  }
  if (YAML::Node net = stage["network"]; net.IsDefined()) {
    if (!net.IsMap()) fail(src.where(net, key + ".network"), "wrong type", "expected a map, got " + shown(net));
    for (const auto& kv : net) {
      const std::string k = kv.first.Scalar();
      if (std::find(kStageNetworkKeys.begin(), kStageNetworkKeys.end(), k) == kStageNetworkKeys.end())
        fail(src.where(kv.first, key + ".network." + k), "a stage cannot change the network's '" + k + "'",
             "expected only trainable or freeze (the weights carry over from stage to stage), got '" + k + "'",
             "set network options at the top level");
    }
  }
  if (YAML::Node name = stage["name"]; name.IsDefined() && (!name.IsScalar() || name.Scalar().empty()))
    fail(src.where(name, key + ".name"), "wrong type", "expected a stage name, got " + shown(name));
}

}  // namespace

Experiment validate_experiment(ExperimentSource source, const Registry& registry) {
  // (YAML::Node's operator= writes through to the node it refers to:
  // handles that already refer to something are rebound with reset().)
  if (const YAML::Node stages = static_cast<const YAML::Node&>(source.root)["stages"]; stages.IsDefined()) {
    if (!stages.IsSequence() || stages.size() == 0)
      fail(source.where(stages, "stages"), "wrong type",
           "expected a non-empty list of stages, e.g. [{name: head, loop: {epochs: 2}}, {name: all, optimizer: {lr: 0.01}}], "
           "got " + shown(stages));
    // The base without `stages:`, then each stage over everything before it.
    YAML::Node base(YAML::NodeType::Map);
    for (const auto& kv : source.root)
      if (kv.first.Scalar() != "stages") base[kv.first.Scalar()] = kv.second;
    ExperimentSource base_source{source.path, base, source.set_origins};
    Experiment e = validate_experiment(base_source, registry);
    e.source.path = source.path;
    e.source.set_origins = source.set_origins;
    e.source.root.reset(source.root);
    std::set<std::string> names;
    YAML::Node so_far = base;
    for (size_t i = 0; i < stages.size(); ++i) {
      const std::string key = index_key("stages", i);
      check_stage(e.source, stages[i], key);
      YAML::Node own(YAML::NodeType::Map);
      for (const auto& kv : stages[i])
        if (kv.first.Scalar() != "name") own[kv.first.Scalar()] = kv.second;
      so_far.reset(merged(so_far, own));
      const std::string name = stages[i]["name"].IsDefined() ? stages[i]["name"].Scalar() : "stage" + std::to_string(i + 1);
      if (!names.insert(name).second)
        fail(e.source.where(stages[i], key + ".name"), "two stages are named '" + name + "'", "expected distinct names");
      try {
        e.stages.push_back(validate_experiment(ExperimentSource{e.source.path, so_far, e.source.set_origins}, registry));
      } catch (const ConfigError& err) {
        throw ConfigError("stage " + std::to_string(i + 1) + " '" + name + "': " + err.what());
      }
      e.stages.back().stage_name = name;
    }
    return e;
  }

  Experiment e;
  e.source = std::move(source);
  const ExperimentSource& src = e.source;
  Validator v{src, registry};
  const YAML::Node& root = src.root;

  for (const auto& kv : root) {
    const std::string k = kv.first.Scalar();
    if (std::find(kTopLevelKeys.begin(), kTopLevelKeys.end(), k) == kTopLevelKeys.end()) {
      std::string hint = closest(k, kTopLevelKeys);
      fail(src.where(kv.first, k), "unknown section '" + k + "'",
           "expected one of " + join(kTopLevelKeys) + ", got '" + k + "'",
           hint.empty() ? "see docs/experiment-yaml.md" : "did you mean '" + hint + "'?");
    }
  }

  YAML::Node name = root["name"];
  if (name.IsDefined()) {
    if (!name.IsScalar() || name.Scalar().empty() || name.Scalar().find('/') != std::string::npos ||
        name.Scalar() == "." || name.Scalar() == "..")
      fail(src.where(name, "name"), "invalid experiment name",
           "expected a folder name without '/', got " + shown(name));
    e.name = name.Scalar();
  } else {
    e.name = fs::path(src.path).stem().string();
  }
  YAML::Node seed = root["seed"];
  if (seed.IsDefined()) {
    int64_t s = 0;
    if (!seed.IsScalar() || !parse_integer(seed.Scalar(), s) || s < 0)
      fail(src.where(seed, "seed"), "wrong type", "expected a non-negative integer, got " + shown(seed));
    e.seed = static_cast<uint64_t>(s);
  }
  e.plugin_dirs = experiment_plugin_dirs(src);

  YAML::Node dataset = root["dataset"];
  if (!dataset.IsDefined() || !dataset.IsMap())
    fail(src.where(dataset.IsDefined() ? dataset : root, "dataset"), "missing or invalid section 'dataset'",
         "expected a map with train: {plugin: ...} and optionally test: {plugin: ...}, got " + shown(dataset),
         "known datasets: " + join(registry.names(Kind::dataset)));
  for (const auto& kv : dataset) {
    const std::string k = kv.first.Scalar();
    if (k != "train" && k != "test")
      fail(src.where(kv.first, "dataset." + k), "unknown key under dataset", "expected train or test, got '" + k + "'",
           did_you_mean(k, {"train", "test"}));
  }
  e.train_data = v.component(v.get(dataset, "train"), "dataset.train", Kind::dataset, {"on_bad_record"});
  if (v.get(dataset, "test").IsDefined())
    e.test_data = v.component(v.get(dataset, "test"), "dataset.test", Kind::dataset, {"on_bad_record"});
  for (auto* d : {&e.train_data, &e.test_data}) {
    if (!d->component) continue;
    YAML::Node policy = v.get(v.get(dataset, d->key.substr(8)), "on_bad_record");
    if (!policy.IsDefined()) continue;
    OptionSpec spec;
    spec.key = "on_bad_record";
    spec.choices = {"error", "skip"};
    d->skip_bad_records = std::get<std::string>(Checker{src, spec, d->key + ".on_bad_record"}.convert(policy)) == "skip";
  }

  e.network = v.component(root["network"], "network", Kind::network, {"pretrained", "trainable", "freeze", "memory_format"});
  if (YAML::Node f = v.get(root["network"], "memory_format"); f.IsDefined()) {
    OptionSpec spec;
    spec.key = "memory_format";
    spec.type = OptionType::string;
    spec.choices = {"contiguous", "channels_last"};
    e.network.memory_format = std::get<std::string>(Checker{src, spec, "network.memory_format"}.convert(f));
  }
  auto regex_ok = [&](const YAML::Node& n, const std::string& key) {
    try {
      std::regex check(n.Scalar());
    } catch (const std::regex_error& err) {
      fail(src.where(n, key), "not a valid regular expression", "expected ECMAScript syntax, got '" + n.Scalar() + "'",
           err.what());
    }
  };
  if (YAML::Node t = v.get(root["network"], "trainable"); t.IsDefined()) {
    if (!t.IsScalar()) fail(src.where(t, "network.trainable"), "wrong type", "expected a regex, got " + shown(t));
    regex_ok(t, "network.trainable");
    e.network.trainable = t.Scalar();
  }
  if (YAML::Node f = v.get(root["network"], "freeze"); f.IsDefined()) {
    OptionSpec spec;
    spec.key = "freeze";
    spec.type = OptionType::string_list;
    e.network.freeze = std::get<std::vector<std::string>>(Checker{src, spec, "network.freeze"}.convert(f));
  }
  if (YAML::Node p = v.get(root["network"], "pretrained"); p.IsDefined()) {
    if (!p.IsScalar()) fail(src.where(p, "network.pretrained"), "wrong type", "expected a file path, got " + shown(p));
    fs::path file = p.Scalar();
    // Like plugin_dirs: relative to the experiment file, unless given with --set
    // (then relative to the working directory, like every command-line path).
    const bool from_command_line = src.set_origins.count("network.pretrained") != 0;
    if (!file.is_absolute() && !from_command_line) file = fs::path(src.path).parent_path() / file;
    e.network.pretrained = file.lexically_normal().string();
  }
  e.loss = v.component(root["loss"], "loss", Kind::loss, {});
  e.optimizer = v.component(root["optimizer"], "optimizer", Kind::optimizer, {"param_groups", "exempt_norm_and_bias"});
  if (YAML::Node x = v.get(root["optimizer"], "exempt_norm_and_bias"); x.IsDefined()) {
    OptionSpec spec;
    spec.key = "exempt_norm_and_bias";
    spec.type = OptionType::boolean;
    e.optimizer.exempt_norm_and_bias = std::get<bool>(Checker{src, spec, "optimizer.exempt_norm_and_bias"}.convert(x));
  }
  if (YAML::Node groups = v.get(root["optimizer"], "param_groups"); groups.IsDefined()) {
    if (!groups.IsSequence())
      fail(src.where(groups, "optimizer.param_groups"), "wrong type",
           "expected a list like [{match: 'bias$', lr_mult: 2.0, weight_decay: 0}], got " + shown(groups));
    for (size_t i = 0; i < groups.size(); ++i) {
      const std::string key = index_key("optimizer.param_groups", i);
      const YAML::Node g = groups[i];
      if (!g.IsMap()) fail(src.where(g, key), "wrong type", "expected a map with match:, got " + shown(g));
      ParamGroupSpec spec;
      spec.where = src.where(g, key);
      for (const auto& kv : g) {
        const std::string k = kv.first.Scalar();
        OptionSpec number;
        number.key = k;
        number.type = OptionType::number;
        number.min_value = 0.0;
        if (k == "match") {
          if (!kv.second.IsScalar()) fail(src.where(kv.second, key + ".match"), "wrong type", "expected a regex");
          regex_ok(kv.second, key + ".match");
          spec.match = kv.second.Scalar();
        } else if (k == "lr_mult") {
          spec.lr_mult = std::get<double>(Checker{src, number, key + ".lr_mult"}.convert(kv.second));
        } else if (k == "weight_decay") {
          spec.weight_decay = std::get<double>(Checker{src, number, key + ".weight_decay"}.convert(kv.second));
        } else {
          fail(src.where(kv.first, key + "." + k), "unknown key in a parameter group",
               "expected match, lr_mult or weight_decay, got '" + k + "'",
               did_you_mean(k, {"match", "lr_mult", "weight_decay"}));
        }
      }
      if (spec.match.empty())
        fail(spec.where, "parameter group without match:", "expected a regex over parameter names", "");
      e.optimizer.param_groups.push_back(spec);
    }
  }

  e.meters = v.component_list("meters", Kind::meter, {"phases"});
  for (size_t i = 0; i < e.meters.size(); ++i) {
    YAML::Node phases = root["meters"][i]["phases"];
    if (!phases.IsDefined()) continue;
    OptionSpec spec;
    spec.key = "phases";
    spec.type = OptionType::string_list;
    spec.choices = {"train", "test"};
    std::string key = index_key("meters", i) + ".phases";
    e.meters[i].phases = std::get<std::vector<std::string>>(Checker{src, spec, key}.convert(phases));
  }
  e.callbacks = v.component_list("callbacks", Kind::callback, {"priority"});
  for (size_t i = 0; i < e.callbacks.size(); ++i)
    e.callbacks[i].priority = v.host_integer(root["callbacks"][i], index_key("callbacks", i), "priority", 0);
  e.overrides = v.component_list("overrides", Kind::additional_override, {"order"});
  for (size_t i = 0; i < e.overrides.size(); ++i)
    if (root["overrides"][i]["order"].IsDefined())
      e.overrides[i].order = v.host_integer(root["overrides"][i], index_key("overrides", i), "order", 0);

  Options loop = v.section("loop", loop_schema());
  e.loop.epochs = loop.get<int64_t>("epochs");
  e.loop.batch_per_device = loop.get<int64_t>("batch_per_device");
  e.loop.test_batch_per_device = loop.get<int64_t>("test_batch_per_device");
  e.loop.train_samples_per_epoch = loop.get<int64_t>("train_samples_per_epoch");
  e.loop.test_every_iters = loop.get<int64_t>("test_every_iters");
  e.loop.test_samples = loop.get<int64_t>("test_samples");
  e.loop.shuffle = loop.get<bool>("shuffle");
  e.loop.drop_last = loop.get<bool>("drop_last");
  e.loop.log_every_iters = loop.get<int64_t>("log_every_iters");
  e.loop.checkpoint_every_iters = loop.get<int64_t>("checkpoint_every_iters");
  e.loop.checkpoint_every_secs = loop.get<double>("checkpoint_every_secs");
  e.loop.decode_threads = loop.get<int64_t>("decode_threads");
  e.loop.iter_size = loop.get<int64_t>("iter_size");
  e.loop.clip_grad_norm = loop.get<double>("clip_grad_norm");
  e.loop.clip_grad_value = loop.get<double>("clip_grad_value");
  e.loop.nonfinite = loop.get<std::string>("nonfinite");
  e.loop.nonfinite_max_skips = loop.get<int64_t>("nonfinite_max_skips");
  e.loop.precision = loop.get<std::string>("precision");
  e.loop.stop_signals = loop.get<std::vector<std::string>>("stop_signals");
  if (e.loop.checkpoint_every_iters % e.loop.iter_size != 0)
    fail(src.where(root["loop"], "loop.checkpoint_every_iters"), "checkpoints must fall between optimizer updates",
         "expected a multiple of iter_size " + std::to_string(e.loop.iter_size) + ", got " +
             std::to_string(e.loop.checkpoint_every_iters),
         "");
  Options stop = v.section("stopping", stopping_schema());
  e.stopping.target_meter = stop.get<std::string>("target_meter");
  e.stopping.target = stop.get<double>("target");
  e.stopping.monitor = stop.get<std::string>("monitor");
  e.stopping.patience = stop.get<int64_t>("patience");
  e.stopping.min_delta = stop.get<double>("min_delta");
  e.stopping.keep_best = stop.get<bool>("keep_best");
  e.stopping.mode = stop.get<std::string>("mode");
  if (e.stopping.patience > 0 && e.stopping.monitor.empty())
    fail(src.where(root["stopping"], "stopping.patience"), "patience needs a meter to watch",
         "expected stopping.monitor, e.g. test_loss", "");
  e.schedule = schedule_config(v.section("schedule", schedule_schema()), src.where(root["schedule"], "schedule"));
  e.loop.prefetch_batches = loop.get<int64_t>("prefetch_batches");

  Options dist = v.section("distributed", distributed_schema());
  e.distributed.num_gpus = dist.get<int64_t>("num_gpus");
  e.distributed.first_gpu_id = dist.get<int64_t>("first_gpu_id");
  e.distributed.threads_per_process = dist.get<int64_t>("threads_per_process");
  e.distributed.num_cpus = dist.get<int64_t>("num_cpus");
  e.distributed.master_addr = dist.get<std::string>("master_addr");
  e.distributed.master_port = dist.get<int64_t>("master_port");
  e.distributed.rendezvous = dist.get<std::string>("rendezvous");
  e.distributed.rendezvous_file = dist.get<std::string>("rendezvous_file");
  e.distributed.timeout_secs = dist.get<int64_t>("timeout_secs");
  e.distributed.bucket_mb = dist.get<int64_t>("bucket_mb");
  e.distributed.sync_batch_norm = dist.get<bool>("sync_batch_norm");
  // float16 autocast on the CPU is slow and unsupported by many CPU kernels:
  // refuse it here, with the fix. (bf16 on a GPU without it is checked where
  // the GPU is known: rank_device.)
  if (e.loop.precision == "fp16-mixed" && e.distributed.num_gpus == 0)
    fail(src.where(static_cast<const YAML::Node&>(root)["loop"]["precision"], "loop.precision"), "fp16-mixed needs a GPU",
         "expected fp32 or bf16-mixed when training on the CPU (distributed.num_gpus: 0), got fp16-mixed",
         "use precision: bf16-mixed on the CPU, or set distributed.num_gpus");

  Options out = validate_options(src, v.get(root, "output"), "output", output_schema(), {"plots"}, "section 'output'");
  e.output.dir = out.get<std::string>("dir");
  e.output.keep_checkpoints = out.get<int64_t>("keep_checkpoints");
  e.output.report = out.get<bool>("report");
  const YAML::Node output_node = v.get(root, "output");
  if (output_node.IsDefined() && output_node.IsMap() && v.get(output_node, "plots").IsDefined()) {
    const YAML::Node plots = v.get(output_node, "plots");
    if (!plots.IsSequence())
      fail(src.where(plots, "output.plots"), "wrong type",
           "expected a list of {title: ..., x: iteration|epoch, ys: [names]}, got " + shown(plots));
    for (size_t i = 0; i < plots.size(); ++i) {
      const std::string key = index_key("output.plots", i);
      const YAML::Node p = plots[i];
      if (!p.IsMap()) fail(src.where(p, key), "wrong type", "expected {title: ..., x: ..., ys: [...]}, got " + shown(p));
      for (const auto& kv : p) {
        const std::string k = kv.first.Scalar();
        if (k != "title" && k != "x" && k != "ys")
          fail(src.where(kv.first, key + "." + k), "unknown key '" + k + "'", "expected title, x or ys",
               did_you_mean(k, {"title", "x", "ys"}));
      }
      PlotSpec spec;
      if (p["ys"].IsDefined()) {
        OptionSpec ys;
        ys.key = "ys";
        ys.type = OptionType::string_list;
        spec.ys = std::get<std::vector<std::string>>(Checker{src, ys, key + ".ys"}.convert(p["ys"]));
      }
      if (spec.ys.empty())
        fail(src.where(p, key + ".ys"), "a plot needs values", "expected ys: [names], e.g. [train_loss, test_loss]");
      if (p["x"].IsDefined()) {
        OptionSpec x;
        x.key = "x";
        x.choices = {"iteration", "epoch"};
        spec.x = std::get<std::string>(Checker{src, x, key + ".x"}.convert(p["x"]));
      }
      spec.title = p["title"].IsDefined() && p["title"].IsScalar() ? p["title"].Scalar() : join(spec.ys);
      e.output.plots.push_back(spec);
    }
  }

  flatten(root["extra"], "", e.extra);
  return e;
}

YAML::Node Experiment::resolved() const {
  auto component_node = [](const ComponentConfig& c) {
    YAML::Node n(YAML::NodeType::Map);
    n["plugin"] = c.plugin;
    if (c.kind == Kind::meter) {
      YAML::Node phases(YAML::NodeType::Sequence);
      phases.SetStyle(YAML::EmitterStyle::Flow);
      for (const auto& p : c.phases) phases.push_back(p);
      n["phases"] = phases;
    }
    if (c.kind == Kind::callback) n["priority"] = std::to_string(c.priority);
    if (c.kind == Kind::additional_override && c.order) n["order"] = std::to_string(*c.order);
    if (c.kind == Kind::network && !c.pretrained.empty()) n["pretrained"] = c.pretrained;
    if (c.kind == Kind::network && !c.trainable.empty()) n["trainable"] = c.trainable;
    if (c.kind == Kind::network && c.memory_format != "contiguous") n["memory_format"] = c.memory_format;
    if (c.kind == Kind::network && !c.freeze.empty()) {
      YAML::Node f(YAML::NodeType::Sequence);
      f.SetStyle(YAML::EmitterStyle::Flow);
      for (const auto& p : c.freeze) f.push_back(p);
      n["freeze"] = f;
    }
    if (c.kind == Kind::optimizer) {
      n["exempt_norm_and_bias"] = c.exempt_norm_and_bias ? "true" : "false";
      YAML::Node groups(YAML::NodeType::Sequence);
      for (const auto& g : c.param_groups) {
        YAML::Node m(YAML::NodeType::Map);
        m["match"] = g.match;
        m["lr_mult"] = to_string(Value(g.lr_mult));
        if (g.weight_decay) m["weight_decay"] = to_string(Value(*g.weight_decay));
        groups.push_back(m);
      }
      n["param_groups"] = groups;
    }
    if (c.kind == Kind::dataset) n["on_bad_record"] = c.skip_bad_records ? "skip" : "error";
    for (const auto& [k, v] : c.options.values()) n[k] = value_node(v);
    return n;
  };
  auto section_node = [](const Options& options) {
    YAML::Node n(YAML::NodeType::Map);
    for (const auto& [k, v] : options.values()) n[k] = value_node(v);
    return n;
  };
  auto list_node = [&](const std::vector<ComponentConfig>& list) {
    YAML::Node n(YAML::NodeType::Sequence);
    for (const auto& c : list) n.push_back(component_node(c));
    return n;
  };

  YAML::Node r(YAML::NodeType::Map);
  r["name"] = name;
  r["seed"] = std::to_string(seed);
  YAML::Node dirs(YAML::NodeType::Sequence);
  for (const auto& d : plugin_dirs) dirs.push_back(d);
  r["plugin_dirs"] = dirs;
  r["dataset"]["train"] = component_node(train_data);
  if (test_data.component) r["dataset"]["test"] = component_node(test_data);
  r["network"] = component_node(network);
  r["loss"] = component_node(loss);
  r["optimizer"] = component_node(optimizer);
  r["meters"] = list_node(meters);
  r["callbacks"] = list_node(callbacks);
  r["overrides"] = list_node(overrides);
  // Host sections: re-validated from the source so every default shows.
  const YAML::Node& root = source.root;
  r["loop"] = section_node(validate_options(source, root["loop"], "loop", loop_schema(), {}, "loop"));
  r["distributed"] =
      section_node(validate_options(source, root["distributed"], "distributed", distributed_schema(), {}, "distributed"));
  r["output"] = section_node(validate_options(source, root["output"], "output", output_schema(), {"plots"}, "output"));
  if (!output.plots.empty()) {
    YAML::Node plots(YAML::NodeType::Sequence);
    for (const auto& p : output.plots) {
      YAML::Node n(YAML::NodeType::Map);
      n["title"] = p.title;
      n["x"] = p.x;
      YAML::Node ys(YAML::NodeType::Sequence);
      ys.SetStyle(YAML::EmitterStyle::Flow);
      for (const auto& y : p.ys) ys.push_back(y);
      n["ys"] = ys;
      plots.push_back(n);
    }
    r["output"]["plots"] = plots;
  }
  r["stopping"] = section_node(validate_options(source, root["stopping"], "stopping", stopping_schema(), {}, "stopping"));
  r["schedule"] = section_node(validate_options(source, root["schedule"], "schedule", schedule_schema(), {}, "schedule"));
  r["extra"] = root["extra"].IsDefined() ? YAML::Clone(root["extra"]) : YAML::Node(YAML::NodeType::Map);
  // Stages as written: each inherits everything above and before it.
  if (root["stages"].IsDefined()) r["stages"] = YAML::Clone(root["stages"]);
  // Which library provided each plugin, for reproducibility (ignored when read back).
  std::set<const LibraryInfo*> seen;
  YAML::Node libs(YAML::NodeType::Sequence);
  auto note = [&](const ComponentConfig& c) {
    if (!c.component || !seen.insert(c.component->library.get()).second) return;
    YAML::Node lib(YAML::NodeType::Map);
    lib["name"] = c.component->library->name;
    lib["version"] = c.component->library->version;
    lib["path"] = c.component->library->path;
    lib["fingerprint"] = c.component->library->fingerprint;
    libs.push_back(lib);
  };
  for (const auto* c : {&train_data, &test_data, &network, &loss, &optimizer}) note(*c);
  for (const auto* list : {&meters, &callbacks, &overrides})
    for (const auto& c : *list) note(c);
  r["resolved_plugins"] = libs;
  return r;
}

}  // namespace trainyard::host
