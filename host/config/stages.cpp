// Multi-stage experiments (`stages:`): each stage is the base with every
// earlier stage's keys and then its own merged over it.
#include <set>

#include "config/detail/validation.h"
#include "trainyard/error.h"
#include "util/text.h"

namespace trainyard::host::detail {
namespace {

// What a stage of a multi-stage run may set (the network's architecture and
// the run's plumbing stay; its weights carry over from stage to stage).
const std::vector<std::string> kStageKeys = {"name", "loop",    "optimizer", "schedule",  "stopping",
                                             "ema",  "network", "dataset",   "checkpoint"};
const std::vector<std::string> kStageNetworkKeys = {"trainable", "freeze"};

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

void check_stage(const Document& src, const YAML::Node& stage, const std::string& key) {
  if (!stage.IsMap())
    fail(src.where(stage, key), "a stage must be a map",
         "expected {name: ..., loop: ..., optimizer: ...}, got " + shown(stage));
  for (const auto& kv : stage) {
    const std::string k = kv.first.Scalar();
    if (std::find(kStageKeys.begin(), kStageKeys.end(), k) == kStageKeys.end())
      fail(src.where(kv.first, key + "." + k), "a stage cannot set '" + k + "'",
           "expected some of " + join(kStageKeys) + ", got " + quoted_value(k),
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
             "expected only trainable or freeze (the weights carry over from stage to stage), got " + quoted_value(k),
             "set network options at the top level");
    }
  }
  if (YAML::Node name = stage["name"]; name.IsDefined() && (!name.IsScalar() || name.Scalar().empty()))
    fail(src.where(name, key + ".name"), "wrong type", "expected a stage name, got " + shown(name));
}

}  // namespace

Experiment validate_staged(const Document& document, const Registry& registry) {
  // (YAML::Node's operator= writes through to the node it refers to:
  // handles that already refer to something are rebound with reset().)
  const YAML::Node stages = static_cast<const YAML::Node&>(document.root)["stages"];
  if (!stages.IsSequence() || stages.size() == 0)
    fail(document.where(stages, "stages"), "wrong type",
         "expected a non-empty list of stages, e.g. [{name: head, loop: {epochs: 2}}, {name: all, optimizer: {lr: "
         "0.01}}], "
         "got " +
             shown(stages));
  // The base without `stages:`, then each stage over everything before it.
  YAML::Node base(YAML::NodeType::Map);
  for (const auto& kv : document.root)
    if (kv.first.Scalar() != "stages") base[kv.first.Scalar()] = kv.second;
  Experiment e = validate_plain(Document{document.path, base, document.set_origins}, registry);
  e.locations = locations_of(document);
  e.stages_as_written = to_json(stages);
  std::set<std::string> names;
  YAML::Node so_far = base;
  for (size_t i = 0; i < stages.size(); ++i) {
    const std::string key = index_key("stages", i);
    check_stage(document, stages[i], key);
    YAML::Node own(YAML::NodeType::Map);
    for (const auto& kv : stages[i])
      if (kv.first.Scalar() != "name") own[kv.first.Scalar()] = kv.second;
    so_far.reset(merged(so_far, own));
    const std::string name =
        stages[i]["name"].IsDefined() ? stages[i]["name"].Scalar() : "stage" + std::to_string(i + 1);
    if (!names.insert(name).second)
      fail(document.where(stages[i], key + ".name"), "two stages are named '" + name + "'", "expected distinct names");
    try {
      e.stages.push_back(validate_plain(Document{document.path, so_far, document.set_origins}, registry));
    } catch (const ConfigError& err) {
      throw ConfigError("stage " + std::to_string(i + 1) + " '" + name + "': " + err.what());
    }
    e.stages.back().stage_name = name;
  }
  return e;
}

}  // namespace trainyard::host::detail
