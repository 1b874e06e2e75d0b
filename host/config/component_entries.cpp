// The component entries of an experiment: each `plugin:` found in the
// registry, its options checked against the plugin's schema, and the host
// keys an entry may carry (on_bad_record, pretrained, param_groups, phases, ...).
#include <regex>

#include "config/detail/validation.h"
#include "trainyard/error.h"
#include "util/text.h"

namespace trainyard::host::detail {
namespace {

struct ComponentReader {
  const Document& source;
  const Registry& registry;

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
    if (!node.IsMap()) fail(c.where, "wrong type", "expected a map with plugin: NAME, got " + shown(node));
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
    c.crash_label =
        std::string(kind_name(kind)) + " '" + c.plugin + "' (" + key + ") from " + c.component->library->path;
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

  int64_t host_integer(const YAML::Node& entry, const std::string& entry_key, const std::string& k,
                       int64_t fallback) const {
    YAML::Node n = get(entry, k);
    if (!n.IsDefined()) return fallback;
    int64_t v = 0;
    if (!n.IsScalar() || !parse_integer(n.Scalar(), v))
      fail(source.where(n, child_key(entry_key, k)), "wrong type", "expected an integer, got " + shown(n));
    return v;
  }

  void regex_ok(const YAML::Node& n, const std::string& key) const {
    try {
      std::regex check(n.Scalar());
    } catch (const std::regex_error& err) {
      fail(source.where(n, key), "not a valid regular expression",
           "expected ECMAScript syntax, got " + quoted_value(n.Scalar()), err.what());
    }
  }

  void datasets(Experiment& e) const {
    const YAML::Node& root = source.root;
    YAML::Node dataset = root["dataset"];
    if (!dataset.IsDefined() || !dataset.IsMap())
      fail(source.where(dataset.IsDefined() ? dataset : root, "dataset"), "missing or invalid section 'dataset'",
           "expected a map with train: {plugin: ...} and optionally test: {plugin: ...}, got " + shown(dataset),
           "known datasets: " + join(registry.names(Kind::dataset)));
    for (const auto& kv : dataset) {
      const std::string k = kv.first.Scalar();
      if (k != "train" && k != "test")
        fail(source.where(kv.first, "dataset." + k), "unknown key under dataset",
             "expected train or test, got " + quoted_value(k), did_you_mean(k, {"train", "test"}));
    }
    e.train_data =
        component(get(dataset, "train"), "dataset.train", Kind::dataset, {"on_bad_record", "max_bad_fraction"});
    if (get(dataset, "test").IsDefined())
      e.test_data =
          component(get(dataset, "test"), "dataset.test", Kind::dataset, {"on_bad_record", "max_bad_fraction"});
    for (auto* d : {&e.train_data, &e.test_data}) {
      if (!d->component) continue;
      const YAML::Node entry = get(dataset, d->key.substr(8));
      YAML::Node policy = get(entry, "on_bad_record");
      if (policy.IsDefined()) {
        const OptionSpec spec = host_spec("on_bad_record", OptionType::string, {"error", "skip"});
        d->skip_bad_records = std::get<std::string>(convert(source, spec, policy, d->key + ".on_bad_record")) == "skip";
      }
      YAML::Node cap = get(entry, "max_bad_fraction");
      if (cap.IsDefined()) {
        OptionSpec spec = host_spec("max_bad_fraction", OptionType::number);
        spec.range(0.0, 1.0);
        d->max_bad_fraction = std::get<double>(convert(source, spec, cap, d->key + ".max_bad_fraction"));
        if (!d->skip_bad_records)
          fail(source.where(cap, d->key + ".max_bad_fraction"), "max_bad_fraction without on_bad_record: skip",
               "expected on_bad_record: skip beside it (without it the first bad record stops the run)", "");
      }
    }
  }

  void network(Experiment& e) const {
    const YAML::Node& root = source.root;
    e.network = component(root["network"], "network", Kind::network,
                          {"pretrained", "pretrained_rename", "trainable", "freeze", "memory_format"});
    if (YAML::Node f = get(root["network"], "memory_format"); f.IsDefined()) {
      const OptionSpec spec = host_spec("memory_format", OptionType::string, {"contiguous", "channels_last"});
      e.network.memory_format = std::get<std::string>(convert(source, spec, f, "network.memory_format"));
    }
    if (YAML::Node t = get(root["network"], "trainable"); t.IsDefined()) {
      if (!t.IsScalar()) fail(source.where(t, "network.trainable"), "wrong type", "expected a regex, got " + shown(t));
      regex_ok(t, "network.trainable");
      e.network.trainable = t.Scalar();
    }
    if (YAML::Node f = get(root["network"], "freeze"); f.IsDefined())
      e.network.freeze = std::get<std::vector<std::string>>(
          convert(source, host_spec("freeze", OptionType::string_list), f, "network.freeze"));
    if (YAML::Node p = get(root["network"], "pretrained"); p.IsDefined()) {
      if (!p.IsScalar())
        fail(source.where(p, "network.pretrained"), "wrong type", "expected a file path, got " + shown(p));
      e.network.pretrained =
          std::get<std::string>(convert(source, host_spec("pretrained", OptionType::path), p, "network.pretrained"));
    }
    if (YAML::Node r = get(root["network"], "pretrained_rename"); r.IsDefined()) {
      if (!r.IsMap())
        fail(source.where(r, "network.pretrained_rename"), "wrong type",
             "expected a map of key prefixes, e.g. {\"module.\": \"\", \"fc.\": \"head.\"}, got " + shown(r));
      for (const auto& item : r) {
        if (!item.second.IsScalar() || !item.first.IsScalar())
          fail(source.where(item.second, "network.pretrained_rename"), "wrong type",
               "expected a prefix (text) for '" + item.first.as<std::string>("?") + "', got " + shown(item.second));
        e.network.pretrained_rename.emplace_back(item.first.Scalar(), item.second.Scalar());
      }
      if (e.network.pretrained.empty())
        fail(source.where(r, "network.pretrained_rename"), "pretrained_rename without pretrained",
             "expected network.pretrained: FILE next to it");
      std::stable_sort(e.network.pretrained_rename.begin(), e.network.pretrained_rename.end(),
                       [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    }
  }

  void optimizer(Experiment& e) const {
    const YAML::Node& root = source.root;
    e.optimizer = component(root["optimizer"], "optimizer", Kind::optimizer, {"param_groups", "exempt_norm_and_bias"});
    if (YAML::Node x = get(root["optimizer"], "exempt_norm_and_bias"); x.IsDefined())
      e.optimizer.exempt_norm_and_bias = std::get<bool>(
          convert(source, host_spec("exempt_norm_and_bias", OptionType::boolean), x, "optimizer.exempt_norm_and_bias"));
    YAML::Node groups = get(root["optimizer"], "param_groups");
    if (!groups.IsDefined()) return;
    if (!groups.IsSequence())
      fail(source.where(groups, "optimizer.param_groups"), "wrong type",
           "expected a list like [{match: 'bias$', lr_mult: 2.0, weight_decay: 0}], got " + shown(groups));
    for (size_t i = 0; i < groups.size(); ++i) {
      const std::string key = index_key("optimizer.param_groups", i);
      const YAML::Node g = groups[i];
      if (!g.IsMap()) fail(source.where(g, key), "wrong type", "expected a map with match:, got " + shown(g));
      ParamGroupSpec spec;
      spec.where = source.where(g, key);
      for (const auto& kv : g) {
        const std::string k = kv.first.Scalar();
        OptionSpec number = host_spec(k, OptionType::number);
        number.min(0.0);
        if (k == "match") {
          if (!kv.second.IsScalar()) fail(source.where(kv.second, key + ".match"), "wrong type", "expected a regex");
          regex_ok(kv.second, key + ".match");
          spec.match = kv.second.Scalar();
        } else if (k == "lr_mult") {
          spec.lr_mult = std::get<double>(convert(source, number, kv.second, key + ".lr_mult"));
        } else if (k == "weight_decay") {
          spec.weight_decay = std::get<double>(convert(source, number, kv.second, key + ".weight_decay"));
        } else {
          fail(source.where(kv.first, key + "." + k), "unknown key in a parameter group",
               "expected match, lr_mult or weight_decay, got " + quoted_value(k),
               did_you_mean(k, {"match", "lr_mult", "weight_decay"}));
        }
      }
      if (spec.match.empty())
        fail(spec.where, "parameter group without match:", "expected a regex over parameter names", "");
      e.optimizer.param_groups.push_back(spec);
    }
  }

  void component_lists(Experiment& e) const {
    const YAML::Node& root = source.root;
    e.meters = component_list("meters", Kind::meter, {"phases"});
    for (size_t i = 0; i < e.meters.size(); ++i) {
      YAML::Node phases = root["meters"][i]["phases"];
      if (!phases.IsDefined()) continue;
      const OptionSpec spec = host_spec("phases", OptionType::string_list, {"train", "test"});
      e.meters[i].phases =
          std::get<std::vector<std::string>>(convert(source, spec, phases, index_key("meters", i) + ".phases"));
    }
    e.callbacks = component_list("callbacks", Kind::callback, {"priority"});
    for (size_t i = 0; i < e.callbacks.size(); ++i)
      e.callbacks[i].priority = host_integer(root["callbacks"][i], index_key("callbacks", i), "priority", 0);
    e.overrides = component_list("overrides", Kind::additional_override, {"order"});
    for (size_t i = 0; i < e.overrides.size(); ++i)
      if (root["overrides"][i]["order"].IsDefined())
        e.overrides[i].order = host_integer(root["overrides"][i], index_key("overrides", i), "order", 0);
  }
};

}  // namespace

void read_components(const Document& document, const Registry& registry, Experiment& e) {
  ComponentReader reader{document, registry};
  reader.datasets(e);
  reader.network(e);
  e.loss = reader.component(document.root["loss"], "loss", Kind::loss, {});
  reader.optimizer(e);
  reader.component_lists(e);
}

}  // namespace trainyard::host::detail
