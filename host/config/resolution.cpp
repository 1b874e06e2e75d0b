// Resolution: the experiment with every default filled in and every path
// absolute (a run's config.yaml and config.json), positions of keys for
// messages, and options for components built outside an experiment.
#include <filesystem>
#include <set>

#include "config/detail/document.h"
#include "config/experiment.h"
#include "trainyard/error.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace trainyard::host {
using detail::to_json;

std::string Experiment::where(const std::string& key_path) const {
  const std::string* found = detail::nearest_entry(locations, key_path);
  return (found ? *found : path) + ": " + key_path;
}

namespace {

ordered_json options_json(const Options& options) {
  ordered_json out = ordered_json::object();
  for (const auto& [k, v] : options.values()) out[k] = to_json(v);
  return out;
}

ordered_json component_json(const ComponentConfig& c) {
  ordered_json n = ordered_json::object();
  n["plugin"] = c.plugin;
  if (c.kind == Kind::meter) n["phases"] = c.phases;
  if (c.kind == Kind::callback) n["priority"] = c.priority;
  if (c.kind == Kind::additional_override && c.order) n["order"] = *c.order;
  if (c.kind == Kind::network && !c.pretrained.empty()) n["pretrained"] = c.pretrained;
  if (c.kind == Kind::network && !c.pretrained_rename.empty()) {
    ordered_json rename = ordered_json::object();
    for (const auto& [from, to] : c.pretrained_rename) rename[from] = to;
    n["pretrained_rename"] = rename;
  }
  if (c.kind == Kind::network && !c.trainable.empty()) n["trainable"] = c.trainable;
  if (c.kind == Kind::network && c.memory_format != "contiguous") n["memory_format"] = c.memory_format;
  if (c.kind == Kind::network && !c.freeze.empty()) n["freeze"] = c.freeze;
  if (c.kind == Kind::optimizer) {
    n["exempt_norm_and_bias"] = c.exempt_norm_and_bias;
    ordered_json groups = ordered_json::array();
    for (const auto& g : c.param_groups) {
      ordered_json m = {{"match", g.match}, {"lr_mult", g.lr_mult}};
      if (g.weight_decay) m["weight_decay"] = *g.weight_decay;
      groups.push_back(m);
    }
    n["param_groups"] = groups;
  }
  if (c.kind == Kind::dataset) {
    n["on_bad_record"] = c.skip_bad_records ? "skip" : "error";
    if (c.skip_bad_records) n["max_bad_fraction"] = c.max_bad_fraction;
  }
  for (const auto& [k, v] : c.options.values()) n[k] = to_json(v);
  return n;
}

ordered_json component_list_json(const std::vector<ComponentConfig>& list) {
  ordered_json out = ordered_json::array();
  for (const auto& c : list) out.push_back(component_json(c));
  return out;
}

}  // namespace

ordered_json Experiment::resolved() const {
  ordered_json r = ordered_json::object();
  r["name"] = name;
  r["seed"] = seed;
  r["plugin_dirs"] = plugin_dirs;
  r["dataset"]["train"] = component_json(train_data);
  if (test_data.component) r["dataset"]["test"] = component_json(test_data);
  r["network"] = component_json(network);
  r["loss"] = component_json(loss);
  r["optimizer"] = component_json(optimizer);
  r["meters"] = component_list_json(meters);
  r["callbacks"] = component_list_json(callbacks);
  r["overrides"] = component_list_json(overrides);
  r["loop"] = options_json(loop_section().options_of(loop));
  r["distributed"] = options_json(distributed_section().options_of(distributed));
  r["output"] = options_json(output_section().options_of(output));
  if (!output.plots.empty()) {
    ordered_json plots = ordered_json::array();
    for (const auto& p : output.plots) plots.push_back({{"title", p.title}, {"x", p.x}, {"ys", p.ys}});
    r["output"]["plots"] = plots;
  }
  r["checkpoint"] = options_json(checkpoint_section().options_of(checkpoint));
  r["stopping"] = options_json(stopping_section().options_of(stopping));
  r["schedule"] = options_json(schedule_section().options_of(schedule));
  r["ema"] = options_json(ema_section().options_of(ema));
  r["extra"] = extra_as_written.is_null() ? ordered_json::object() : extra_as_written;
  // Stages as written: each inherits everything above and before it.
  if (!stages_as_written.is_null()) r["stages"] = stages_as_written;
  // Which library provided each plugin, for reproducibility (ignored when read back).
  std::set<const LibraryInfo*> seen;
  ordered_json libs = ordered_json::array();
  auto note = [&](const ComponentConfig& c) {
    if (!c.component || !seen.insert(c.component->library.get()).second) return;
    const LibraryInfo& lib = *c.component->library;
    libs.push_back({{"name", lib.name},
                    {"version", lib.version},
                    {"path", lib.path.empty() ? "" : fs::absolute(lib.path).lexically_normal().string()},
                    {"fingerprint", lib.fingerprint}});
  };
  for (const auto* c : {&train_data, &test_data, &network, &loss, &optimizer}) note(*c);
  for (const auto* list : {&meters, &callbacks, &overrides})
    for (const auto& c : *list) note(c);
  r["resolved_plugins"] = libs;
  // What `auto` became on this machine, for the record (ignored when read
  // back and on resume, where another machine may choose otherwise).
  if (loop.precision == "auto")
    r["resolved_precision"] = {{"precision", loop.effective_precision()}, {"reason", loop.precision_reason}};
  return r;
}

namespace {
// A value as the YAML node a file would hold for it.
YAML::Node value_node(const Value& value) {
  auto scalars = [](const auto& list) {
    YAML::Node seq(YAML::NodeType::Sequence);
    for (const auto& x : list) seq.push_back(to_string(Value(x)));
    return seq;
  };
  if (auto* v = std::get_if<std::vector<int64_t>>(&value)) return scalars(*v);
  if (auto* v = std::get_if<std::vector<double>>(&value)) return scalars(*v);
  if (auto* v = std::get_if<std::vector<std::string>>(&value)) return scalars(*v);
  return YAML::Node(to_string(value));
}
}  // namespace

Options component_options(const Schema& schema, std::map<std::string, Value> values, const std::string& yaml_flow_map,
                          const std::string& what) {
  detail::Document document;
  document.path = "command line";
  document.set_origins[what] = "command line";  // no line to point at: every key is named under `what`
  YAML::Node map(YAML::NodeType::Map);
  for (const auto& [k, v] : values) map[k] = value_node(v);
  if (!yaml_flow_map.empty()) {
    const YAML::Node given = detail::parse_yaml_text("command line: " + what, yaml_flow_map);
    if (!given.IsMap())
      throw ConfigError("command line: " + what + ": not a map", "expected a map such as '{mean: [0.286]}'", "");
    for (const auto& kv : given) map[kv.first.Scalar()] = kv.second;
  }
  return detail::validate_options(document, map, what, schema, {}, what);
}

}  // namespace trainyard::host
