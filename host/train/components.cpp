#include "train/components.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "train/checkpoint.h"
#include "train/guard.h"
#include "util/text.h"

namespace trainyard::host {

std::string component_label(const ComponentConfig& config) {
  if (!config.component) return config.key;
  const auto& lib = *config.component->library;
  return std::string(kind_name(config.kind)) + " '" + config.plugin + "' from " +
         std::filesystem::path(lib.path).filename().string() + " " + lib.version;
}

namespace {

template <class T>
Built<T> make(const ComponentConfig& config, const Context& base) {
  Context context = base;
  context.component = config.key;
  const auto& factory = std::get<Factory<T>>(config.component->factory);
  auto object = guarded(config, "construction", [&] { return factory(config.options, context); });
  if (!object) throw ComponentFailure(component_label(config) + " returned nothing from its factory");
  return {&config, std::move(object)};
}

}  // namespace

std::pair<int64_t, int64_t> parameter_count(Network& network) {
  int64_t all = 0, trainable = 0;
  for (const auto& p : network.parameters()) {
    all += p.numel();
    if (p.requires_grad()) trainable += p.numel();
  }
  return {all, trainable};
}

Components build_components(const Experiment& e, Context& context) {
  Components c;
  c.train_data = make<Dataset>(e.train_data, context);
  context.dataset = guarded(e.train_data, "info", [&] { return c.train_data.object->info(); });
  context.dataset.size = c.train_data.object->size();
  if (context.dataset.size == 0)
    throw ConfigError(e.train_data.where + ": the training dataset is empty",
                      "expected at least one sample, got 0", "check the dataset's options");
  if (e.test_data.component) c.test_data = make<Dataset>(e.test_data, context);

  c.network = make<Network>(e.network, context);
  guarded(e.network, "to(device)", [&] { c.network.object->to(context.device); });
  if (!e.network.pretrained.empty()) {
    PretrainedReport report = load_pretrained(e.network.pretrained, *c.network.object);
    context.log("pretrained: " + std::to_string(report.loaded.size()) + " tensors loaded from " +
                e.network.pretrained);
    if (!report.missing.empty()) context.log("pretrained: missing (left as initialized): " + join(report.missing));
    if (!report.unexpected.empty()) context.log("pretrained: unexpected (ignored): " + join(report.unexpected));
  }
  c.loss = make<Loss>(e.loss, context);

  c.optimizer_plugin = make<Optimizer>(e.optimizer, context);
  std::vector<at::Tensor> trainable;
  for (auto& p : c.network.object->parameters())
    if (p.requires_grad()) trainable.push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(trainable);
  c.optimizer = guarded(e.optimizer, "build", [&] { return c.optimizer_plugin.object->build(std::move(groups)); });
  if (!c.optimizer) throw ComponentFailure(component_label(e.optimizer) + " built no optimizer");

  for (const auto& m : e.meters)
    for (const auto& phase : m.phases)
      (phase == "train" ? c.train_meters : c.test_meters).push_back(make<Meter>(m, context));

  for (const auto& cb : e.callbacks) c.callbacks.push_back(make<Callback>(cb, context));
  std::stable_sort(c.callbacks.begin(), c.callbacks.end(),
                   [](const auto& a, const auto& b) { return a.config->priority < b.config->priority; });

  // Overrides: each stage may be replaced by several only when all of them
  // say in which order (lower installs first; later ones wrap earlier ones).
  for (const auto& o : e.overrides) c.overrides.push_back(make<AdditionalOverride>(o, context));
  std::map<std::string, std::vector<const ComponentConfig*>> by_stage;
  const std::vector<std::string> stage_names(std::begin(kStageNames), std::end(kStageNames));
  for (const auto& o : c.overrides) {
    auto stages = guarded(*o.config, "replaces()", [&] { return o.object->replaces(); });
    for (const auto& s : stages) {
      if (std::find(stage_names.begin(), stage_names.end(), s) == stage_names.end())
        throw ComponentFailure(component_label(*o.config) + " replaces unknown stage '" + s +
                               "' (stages: " + join(stage_names) + ")");
      by_stage[s].push_back(o.config);
    }
  }
  for (const auto& [stage, list] : by_stage) {
    if (list.size() < 2) continue;
    std::vector<int64_t> orders;
    for (const auto* o : list) {
      if (!o->order)
        throw ConfigError(o->where + ": " + o->key + " ('" + o->plugin + "') and " +
                              (list[0] == o ? list[1] : list[0])->key + " both replace stage '" + stage +
                              "' and no explicit order is given",
                          "expected order: N on every override of stage '" + stage + "', got none on " + o->key,
                          "add order: to each (lower installs first; higher wraps lower)");
      orders.push_back(*o->order);
    }
    std::sort(orders.begin(), orders.end());
    if (std::adjacent_find(orders.begin(), orders.end()) != orders.end())
      throw ConfigError(list[0]->where + ": overrides of stage '" + stage + "' share an order value",
                        "expected distinct order: values", "give each override of '" + stage + "' its own order");
  }
  std::stable_sort(c.overrides.begin(), c.overrides.end(), [](const auto& a, const auto& b) {
    return a.config->order.value_or(0) < b.config->order.value_or(0);
  });
  return c;
}

}  // namespace trainyard::host
