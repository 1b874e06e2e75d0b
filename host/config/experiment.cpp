// Validating an experiment: the top-level keys, name and seed, the host
// sections (each bound from its schema) and output.plots; the component
// entries are read in components.cpp.
#include "config/experiment.h"

#include <filesystem>
#include <set>

#include "config/detail/validation.h"
#include "config/renamed_keys.h"
#include "config/step_rules.h"
#include "log/log.h"
#include "trainyard/error.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace detail {
namespace {

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

Options section(const Document& source, const std::string& key, const Schema& schema) {
  return validate_options(source, get(source.root, key), key, schema, {}, "section '" + key + "'");
}

void read_plots(const Document& source, Experiment& e) {
  const YAML::Node output_node = get(source.root, "output");
  if (!output_node.IsDefined() || !output_node.IsMap() || !get(output_node, "plots").IsDefined()) return;
  const YAML::Node plots = get(output_node, "plots");
  if (!plots.IsSequence())
    fail(source.where(plots, "output.plots"), "wrong type",
         "expected a list of {title: ..., x: iteration|epoch, ys: [names]}, got " + shown(plots));
  for (size_t i = 0; i < plots.size(); ++i) {
    const std::string key = index_key("output.plots", i);
    const YAML::Node p = plots[i];
    if (!p.IsMap())
      fail(source.where(p, key), "wrong type", "expected {title: ..., x: ..., ys: [...]}, got " + shown(p));
    for (const auto& kv : p) {
      const std::string k = kv.first.Scalar();
      if (k != "title" && k != "x" && k != "ys")
        fail(source.where(kv.first, key + "." + k), "unknown key '" + k + "'", "expected title, x or ys",
             did_you_mean(k, {"title", "x", "ys"}));
    }
    PlotSpec spec;
    if (p["ys"].IsDefined())
      spec.ys = std::get<std::vector<std::string>>(
          convert(source, host_spec("ys", OptionType::string_list), p["ys"], key + ".ys"));
    if (spec.ys.empty())
      fail(source.where(p, key + ".ys"), "a plot needs values", "expected ys: [names], e.g. [train_loss, test_loss]");
    if (p["x"].IsDefined())
      spec.x = std::get<std::string>(
          convert(source, host_spec("x", OptionType::string, {"iteration", "epoch"}), p["x"], key + ".x"));
    spec.title = p["title"].IsDefined() && p["title"].IsScalar() ? p["title"].Scalar() : join(spec.ys);
    e.output.plots.push_back(spec);
  }
}

// The host sections, each bound from its schema, and the checks across keys.
void read_sections(const Document& source, Experiment& e) {
  const YAML::Node& root = source.root;
  e.loop = loop_section().bind(section(source, "loop", loop_schema()));
  {
    const std::string& threads = e.loop.decode_threads;
    int64_t count = -1;
    if (threads != "auto" && (!parse_integer(threads, count) || count < 0 || count > 64))
      fail(source.where(root["loop"]["decode_threads"], "loop.decode_threads"), "not a thread count",
           "expected auto or an integer from 0 to 64, got " + quoted_value(threads), "");
  }
  {
    const std::string& every = e.loop.update_checks_every;
    int64_t count = 0;
    if (every != "auto" && (!parse_integer(every, count) || count < 1 || count > 1000000))
      fail(source.where(root["loop"]["update_checks_every"], "loop.update_checks_every"), "not an update count",
           "expected auto or an integer from 1 to 1000000, got " + quoted_value(every), "");
  }
  if ((e.loop.classes_per_batch > 0) != (e.loop.samples_per_class > 0))
    fail(source.where(root["loop"][e.loop.classes_per_batch > 0 ? "classes_per_batch" : "samples_per_class"],
                      e.loop.classes_per_batch > 0 ? "loop.classes_per_batch" : "loop.samples_per_class"),
         "P x K batches need both sizes",
         "expected loop.classes_per_batch P and loop.samples_per_class K, both above 0", "");
  if (e.loop.classes_per_batch > 0 && e.loop.batch_per_device != e.loop.classes_per_batch * e.loop.samples_per_class)
    fail(source.where(root["loop"]["batch_per_device"], "loop.batch_per_device"), "not a P x K batch",
         "expected classes_per_batch x samples_per_class = " +
             std::to_string(e.loop.classes_per_batch * e.loop.samples_per_class) + ", got " +
             std::to_string(e.loop.batch_per_device),
         "set loop.batch_per_device to " + std::to_string(e.loop.classes_per_batch * e.loop.samples_per_class));
  if (e.loop.classes_per_batch > 0 && e.loop.train_samples_per_epoch > 0)
    fail(source.where(root["loop"]["train_samples_per_epoch"], "loop.train_samples_per_epoch"),
         "P x K batches decide the epoch's length", "expected train_samples_per_epoch 0 with classes_per_batch", "");
  e.stopping = stopping_section().bind(section(source, "stopping", stopping_schema()));
  if (e.stopping.patience > 0 && e.stopping.monitor.empty())
    fail(source.where(root["stopping"], "stopping.patience"), "patience needs a meter to watch",
         "expected stopping.monitor, e.g. test_loss", "");
  e.schedule =
      schedule_config(section(source, "schedule", schedule_schema()), source.where(root["schedule"], "schedule"));
  e.distributed = distributed_section().bind(section(source, "distributed", distributed_schema()));
  e.ema = ema_section().bind(section(source, "ema", ema_schema()));
  e.checkpoint = checkpoint_section().bind(section(source, "checkpoint", checkpoint_schema()));
  if (e.checkpoint.every_iters % e.loop.iter_size != 0)
    fail(source.where(root["checkpoint"]["every_iters"], "checkpoint.every_iters"),
         "checkpoints must fall between optimizer updates",
         "expected a multiple of loop.iter_size " + std::to_string(e.loop.iter_size) + ", got " +
             std::to_string(e.checkpoint.every_iters),
         "");
  if (e.ema.evaluate && !e.ema.enabled)
    fail(source.where(root["ema"]["evaluate"], "ema.evaluate"), "there is no average to evaluate",
         "expected ema.enabled: true with ema.evaluate: true", "set ema.enabled: true");
  // float16 autocast on the CPU is slow and unsupported by many CPU kernels:
  // refuse it here, with the fix. (bf16 on a GPU without it is checked where
  // the GPU is known: rank_device.)
  if (e.loop.precision == "fp16-mixed" && e.distributed.num_gpus == 0)
    fail(source.where(root["loop"]["precision"], "loop.precision"), "fp16-mixed needs a GPU",
         "expected fp32 or bf16-mixed when training on the CPU (distributed.num_gpus: 0), got fp16-mixed",
         "use precision: bf16-mixed on the CPU, or set distributed.num_gpus");
  if (e.loop.cuda_graph) {
    // What the file alone says; the rest (the build, the processes, the
    // optimizer, the sample shape) where the run starts, by the same table.
    CudaGraphFacts file;
    file.cuda = e.distributed.num_gpus > 0;
    file.iter_size = e.loop.iter_size;
    file.checks.checks_every = e.loop.update_checks_count();
    file.checks.loss_scaler = e.loop.precision == "fp16-mixed";
    const auto refusal = cuda_graph_refusal(file);
    if (refusal) fail(source.where(root["loop"]["cuda_graph"], "loop.cuda_graph"), refusal->why, refusal->expected, "");
  }
  e.output = output_section().bind(
      validate_options(source, get(root, "output"), "output", output_schema(), {"plots"}, "section 'output'"));
  read_plots(source, e);
}

}  // namespace

Experiment validate_plain(const Document& src, const Registry& registry) {
  Experiment e;
  e.path = src.path;
  e.locations = locations_of(src);
  const YAML::Node& root = src.root;

  for (const auto& kv : root) {
    const std::string k = kv.first.Scalar();
    if (std::find(kTopLevelKeys.begin(), kTopLevelKeys.end(), k) == kTopLevelKeys.end()) {
      std::string hint = closest(k, kTopLevelKeys);
      fail(src.where(kv.first, k), "unknown section '" + k + "'",
           "expected one of " + join(kTopLevelKeys) + ", got " + quoted_value(k),
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
    OptionSpec spec = host_spec("seed", OptionType::integer);
    spec.min(0);
    e.seed = static_cast<uint64_t>(std::get<int64_t>(convert(src, spec, seed, "seed")));
  }
  e.plugin_dirs = plugin_dirs_of(src);

  read_components(src, registry, e);
  read_sections(src, e);

  flatten(root["extra"], "", e.extra);
  e.extra_as_written = root["extra"].IsDefined() ? to_json(root["extra"]) : nlohmann::ordered_json::object();
  return e;
}

// The keys renamed_keys() lists, written under their old names in `map` (the
// file's root, or one of its stages): moved to their new places, once, with
// a deprecation line each (once a process: sweeps validate again).
void move_renamed_keys(const Document& document, const YAML::Node& map, const std::string& prefix) {
  if (!map.IsMap()) return;
  static std::set<std::string> said;
  for (const RenamedKey& k : renamed_keys()) {
    const auto [old_section, old_key] = section_and_option(k.before);
    const auto [new_section, new_key] = section_and_option(k.now);
    YAML::Node section = get(map, old_section);
    if (!section.IsDefined() || !section.IsMap()) continue;
    const YAML::Node value = get(section, old_key);
    if (!value.IsDefined()) continue;
    const std::string where = document.where(value, prefix + k.before);
    const YAML::Node target = get(map, new_section);
    if (target.IsDefined() && !target.IsMap()) continue;  // the section's own check names that
    if (target.IsDefined() && get(target, new_key).IsDefined())
      fail(where, "given twice: under its old name and as " + prefix + k.now,
           "expected " + prefix + k.now + " only (" + prefix + k.before + " is its deprecated name)",
           "remove " + prefix + k.before);
    if (said.insert(where).second) log_warning("warning: " + where + " is deprecated: read as " + prefix + k.now);
    YAML::Node writable = map;  // a handle: writes reach the document
    if (!target.IsDefined()) writable[new_section] = YAML::Node(YAML::NodeType::Map);
    YAML::Node moved_to = writable[new_section];
    moved_to[new_key] = value;
    section.remove(old_key);
  }
}

}  // namespace detail

Experiment validate_experiment(ExperimentSource source, const Registry& registry) {
  const detail::Document& document = *source.document;
  const YAML::Node& root = document.root;
  detail::move_renamed_keys(document, root, "");
  if (const YAML::Node stages = detail::get(root, "stages"); stages.IsDefined() && stages.IsSequence())
    for (size_t i = 0; i < stages.size(); ++i)
      detail::move_renamed_keys(document, stages[i], detail::index_key("stages", i) + ".");
  if (static_cast<const YAML::Node&>(document.root)["stages"].IsDefined())
    return detail::validate_staged(document, registry);
  return detail::validate_plain(document, registry);
}

}  // namespace trainyard::host
