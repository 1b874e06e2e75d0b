#include "train/components.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <type_traits>

#include <unistd.h>

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include "train/guard.h"
#include "train/loss_values_meter.h"
#include "train/pretrained.h"
#include "util/shape.h"
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
  if constexpr (std::is_same_v<T, Dataset>) {
    // A negative count would pass every "is it empty" check and fail much later (an empty batch).
    const int64_t size = guarded(config, "size", [&] { return object->size(); });
    if (size < 0)
      throw ConfigError(config.where + " (" + component_label(config) + "): size() returned " + std::to_string(size),
                        "expected the number of samples, 0 or more, got " + std::to_string(size),
                        "the dataset plugin's size() is wrong: fix it, or check the options it counts from");
  }
  Facets facets = facets_of(config.component, *object);  // once: later code reads the record
  return {&config, std::move(object), facets};
}

// network.trainable (regex) and network.freeze (submodule paths): what does
// not train gets requires_grad false; frozen submodules also stay in eval
// mode, so their batch norm keeps its statistics.
void freeze_parameters(const ComponentConfig& net, Network& network,
                       std::vector<std::shared_ptr<torch::nn::Module>>& frozen) {
  if (!net.trainable.empty()) {
    const std::regex keep(net.trainable);
    for (auto& p : network.named_parameters())
      if (!std::regex_search(p.key(), keep)) p.value().requires_grad_(false);
  }
  auto modules = network.named_modules();
  for (const auto& path : net.freeze) {
    if (!modules.contains(path)) {
      std::vector<std::string> names;
      for (const auto& m : modules)
        if (!m.key().empty()) names.push_back(m.key());
      throw ConfigError(net.where + ": network.freeze: no submodule '" + path + "' in network '" + net.plugin + "'",
                        "expected one of " + join(names), did_you_mean(path, names));
    }
    auto module = modules[path];
    for (auto& p : module->parameters()) p.requires_grad_(false);
    frozen.push_back(module);
  }
  bool any = false;
  for (auto& p : network.parameters()) any = any || p.requires_grad();
  if (!any)
    throw ConfigError(net.where + ": nothing left to train", "expected trainable / freeze to leave some parameters",
                      "check network.trainable and network.freeze");
}

// The optimizer's parameter groups: optimizer.param_groups by regex over
// parameter names (first match wins), 1-d parameters without weight decay
// when exempt_norm_and_bias, the rest in the default group.
void set_weight_decay(const ComponentConfig& who, torch::optim::OptimizerOptions& options, double decay) {
  if (auto* o = dynamic_cast<torch::optim::SGDOptions*>(&options))
    o->weight_decay(decay);
  else if (auto* o = dynamic_cast<torch::optim::AdamOptions*>(&options))
    o->weight_decay(decay);
  else if (auto* o = dynamic_cast<torch::optim::AdamWOptions*>(&options))
    o->weight_decay(decay);
  else if (auto* o = dynamic_cast<torch::optim::RMSpropOptions*>(&options))
    o->weight_decay(decay);
  else if (auto* o = dynamic_cast<torch::optim::AdagradOptions*>(&options))
    o->weight_decay(decay);
  else
    throw ConfigError(who.where + ": optimizer '" + who.plugin + "' has options trainyard cannot set weight decay on",
                      "expected an optimizer built on LibTorch's SGD, Adam, AdamW, RMSprop or Adagrad",
                      "remove weight_decay from optimizer.param_groups and exempt_norm_and_bias");
}

void build_optimizer(const ComponentConfig& spec, Network& network, Optimizer& plugin, Components& c) {
  const size_t n = spec.param_groups.size();
  std::vector<std::regex> patterns;
  for (const auto& g : spec.param_groups) patterns.emplace_back(g.match);
  // Slot n is the default group, n + 1 the no-decay group.
  std::vector<std::vector<at::Tensor>> members(n + 2);
  std::vector<std::vector<std::string>> names(n + 2);
  for (auto& p : network.named_parameters()) {
    if (!p.value().requires_grad()) continue;
    size_t slot = n;
    for (size_t i = 0; i < n && slot == n; ++i)
      if (std::regex_search(p.key(), patterns[i])) slot = i;
    if (slot == n && spec.exempt_norm_and_bias && p.value().dim() <= 1) slot = n + 1;
    members[slot].push_back(p.value());
    names[slot].push_back(p.key());
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  std::vector<size_t> slots;
  for (size_t s = 0; s < n + 2; ++s)
    if (!members[s].empty()) groups.emplace_back(members[s]), slots.push_back(s);
  c.optimizer = guarded(spec, "build", [&] { return plugin.build(std::move(groups)); });
  if (!c.optimizer) throw ComponentFailure(component_label(spec) + " built no optimizer");
  c.optimizer_plugin.facets = with_built_optimizer(c.optimizer_plugin.facets, *c.optimizer);
  auto& built = c.optimizer->param_groups();
  if (built.size() != slots.size())
    throw ComponentFailure(component_label(spec) + " built " + std::to_string(built.size()) +
                           " parameter groups from " + std::to_string(slots.size()));
  for (size_t i = 0; i < slots.size(); ++i) {
    const size_t s = slots[i];
    auto& options = built[i].options();
    GroupReport report;
    report.weight_decay = "optimizer's";
    if (s < n) {
      options.set_lr(options.get_lr() * spec.param_groups[s].lr_mult);
      if (spec.param_groups[s].weight_decay) {
        set_weight_decay(spec, options, *spec.param_groups[s].weight_decay);
        report.weight_decay = to_string(Value(*spec.param_groups[s].weight_decay));
      }
      report.name = "param_groups[" + std::to_string(s) + "] (match '" + spec.param_groups[s].match + "')";
    } else if (s == n + 1) {
      set_weight_decay(spec, options, 0.0);
      report.weight_decay = "0.0";
      report.name = "no decay (1-d: biases and norm weights)";
    } else {
      report.name = "default";
    }
    report.lr = options.get_lr();
    report.parameters = names[s];
    for (auto& t : members[s]) report.numel += t.numel();
    c.groups.push_back(std::move(report));
  }
}

// The test split must be what the network trained on: the same classes and
// channels (an empty test split is as wrong as an empty training split).
// Height and width may differ (a fully convolutional network segments a
// whole test image it trained on crops of): the wiring check runs a test
// batch through the network, and one that takes a single size fails there.
void check_splits_agree(const Experiment& e, const DatasetInfo& train, const Dataset& test_data) {
  DatasetInfo test = guarded(e.test_data, "info", [&] { return test_data.info(); });
  const int64_t size = guarded(e.test_data, "size", [&] { return test_data.size(); });
  if (size == 0)
    throw ConfigError(e.test_data.where + ": the test dataset is empty", "expected at least one sample, got 0",
                      "check the dataset's options, or remove dataset.test");
  if (train.num_classes > 0 && test.num_classes > 0 && train.num_classes != test.num_classes)
    throw ConfigError(e.test_data.where + ": the test dataset has " + std::to_string(test.num_classes) +
                          " classes, the training dataset " + std::to_string(train.num_classes),
                      "expected the same classes in both splits", "check that both splits come from one dataset");
  const auto& a = train.sample_shape;
  const auto& b = test.sample_shape;
  if (!a.empty() && !b.empty() && (a.size() != b.size() || (a.size() > 1 && a[0] != b[0])))
    throw ConfigError(e.test_data.where + ": test samples of shape " + shape_text(test.sample_shape) +
                          ", training samples " + shape_text(train.sample_shape),
                      "expected samples of one rank and channel count in both splits (the network sees both)",
                      "give both splits the same color (and load_size and crop_size for a network of one size)");
}

// A batch that cannot fit in this machine's memory is bad input, found now
// rather than as an allocation failure inside the first batch.
void check_batch_fits(const Experiment& e, const DatasetInfo& train) {
  if (train.sample_shape.empty()) return;
  double bytes = 4.0 * static_cast<double>(e.loop.batch_per_device);  // float inputs
  for (int64_t d : train.sample_shape) {
    if (d < 1)
      throw ConfigError(e.train_data.where + ": samples of shape " + shape_text(train.sample_shape),
                        "expected every dimension of a sample to be at least 1", "check the dataset's options");
    bytes *= static_cast<double>(d);
  }
  const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (memory > 0 && bytes > memory)
    throw ConfigError(e.train_data.where + ": a batch of " + std::to_string(e.loop.batch_per_device) +
                          " samples of shape " + shape_text(train.sample_shape) + " needs " +
                          std::to_string(static_cast<int64_t>(bytes / (1 << 30))) + " GiB",
                      "expected a batch that fits in this machine's " +
                          std::to_string(static_cast<int64_t>(memory / (1 << 30))) + " GiB",
                      "check the dataset's sample shape (load_size, crop_size) and loop.batch_per_device");
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

void check_weights_carry_over(const Network& later, const Network& earlier, size_t earlier_stage) {
  auto compare = [&](const torch::OrderedDict<std::string, at::Tensor>& mine,
                     const torch::OrderedDict<std::string, at::Tensor>& theirs, const char* what) {
    for (const auto& item : mine) {
      const at::Tensor* there = theirs.find(item.key());
      if (there && there->sizes() == item.value().sizes()) continue;
      throw ConfigError("the network's " + std::string(what) + " '" + item.key() + "' is " +
                            shape_text(item.value().sizes()) + " in this stage but " +
                            (there ? shape_text(there->sizes()) : std::string("absent")) + " in stage " +
                            std::to_string(earlier_stage + 1) + ", whose weights this stage starts from",
                        "expected the same network shapes in every stage (the same classes and sample shape)",
                        "give every stage a dataset of the same classes and sample shape, and the same network");
    }
  };
  compare(later.named_parameters(), earlier.named_parameters(), "parameter");
  compare(later.named_buffers(), earlier.named_buffers(), "buffer");
}

void check_network_settings(const ComponentConfig& net, Network& network) {
  std::vector<bool> trains;
  for (const auto& p : network.parameters()) trains.push_back(p.requires_grad());
  std::vector<std::shared_ptr<torch::nn::Module>> frozen;
  auto restore = [&] {
    auto params = network.parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].requires_grad_(trains[i]);
  };
  try {
    freeze_parameters(net, network, frozen);
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

std::optional<OutputKind> network_output_kind(const Built<Network>& network) {
  const NetworkOutputs* says = network.facets.network_outputs;
  if (!says) return std::nullopt;
  return guarded(*network.config, "output_kind", [&] { return says->output_kind(); });
}

std::optional<InputNormalization> input_normalization(const ComponentConfig& config, const Dataset& dataset,
                                                      const Facets& facets) {
  if (!facets.input_normalization) return std::nullopt;
  return guarded(config, "input_normalization", [&] { return dataset.input_normalization(); });
}

bool dataset_streamed(const ComponentConfig& config, const Dataset& dataset, const Facets& facets) {
  if (!facets.streamed) return false;
  return guarded(config, "streamed", [&] { return dataset.streamed(); });
}

Built<Dataset> build_dataset(const ComponentConfig& config, const Context& context) {
  return make<Dataset>(config, context);
}

Components build_components(const Experiment& e, Context& context) {
  Components c;
  c.train_data = make<Dataset>(e.train_data, context);
  context.dataset = guarded(e.train_data, "info", [&] { return c.train_data.object->info(); });
  context.dataset.size = c.train_data.object->size();
  if (context.dataset.size == 0)
    throw ConfigError(e.train_data.where + ": the training dataset is empty", "expected at least one sample, got 0",
                      "check the dataset's options");
  check_batch_fits(e, context.dataset);
  if (e.test_data.component) {
    c.test_data = make<Dataset>(e.test_data, context);
    check_splits_agree(e, context.dataset, *c.test_data.object);
  }

  c.network = make<Network>(e.network, context);
  guarded(e.network, "to(device)", [&] { c.network.object->to(context.device); });
  // network.memory_format: channels_last: 4-d weights (convolutions) in NHWC,
  // as the inputs the loader hands out, so oneDNN/cuDNN need no reorders.
  if (e.network.memory_format == "channels_last") {
    at::NoGradGuard no_grad;
    for (auto& p : c.network.object->parameters())
      // to(), not contiguous(): a weight with one input channel counts as
      // channels-last already and contiguous() would keep its NCHW strides,
      // which makes that convolution (and the next) pick NCHW kernels.
      if (p.dim() == 4)
        p.set_data(p.data().to(p.options(), /*non_blocking=*/false, /*copy=*/false, at::MemoryFormat::ChannelsLast));
  }
  if (!e.network.pretrained.empty()) {
    PretrainedReport report = load_pretrained(e.network.pretrained, *c.network.object, e.network.pretrained_rename);
    context.log("pretrained: " + std::to_string(report.loaded.size()) + " tensors loaded from " + e.network.pretrained);
    if (!report.missing.empty()) context.log("pretrained: missing (left as initialized): " + join(report.missing));
    if (!report.unexpected.empty()) context.log("pretrained: unexpected (ignored): " + join(report.unexpected));
  }
  c.loss = make<Loss>(e.loss, context);
  // A loss's own parameters (SDK 1.4 LossParameters) train, checkpoint and average over ranks as the network's.
  if (LossParameters* owns = c.loss.facets.loss_parameters) {
    auto module = guarded(e.loss, "module", [&] { return owns->module(); });
    if (!module) throw ComponentFailure(component_label(e.loss) + " returned no module from module()");
    guarded(e.loss, "module", [&] {
      c.network.object->register_module("loss", module);
      module->to(context.device);
    });
  }

  freeze_parameters(e.network, *c.network.object, c.frozen);

  c.optimizer_plugin = make<Optimizer>(e.optimizer, context);
  build_optimizer(e.optimizer, *c.network.object, *c.optimizer_plugin.object, c);

  for (const auto& m : e.meters)
    for (const auto& phase : m.phases) {
      Built<Meter> meter = make<Meter>(m, context);
      if (phase == "train" && meter.facets.sample_meter)
        throw ConfigError(m.where + ": " + m.key + " (" + component_label(m) +
                              ") keeps one row per sample, which a checkpoint in mid-epoch cannot hold",
                          "expected phases: [test], got train", "set phases: [test] on " + m.key);
      (phase == "train" ? c.train_meters : c.test_meters).push_back(std::move(meter));
    }
  // A loss that reports values (SDK 1.4 LossValues) gets a meter per phase, named after the loss.
  for (auto* meters : {&c.train_meters, &c.test_meters})
    if (auto meter = guarded(e.loss, "last_values",
                             [&] { return make_loss_values_meter(c.loss.object, c.loss.facets.loss_values); }))
      meters->push_back({&e.loss, std::move(meter), Facets{}});  // the host's own meter: no optional parts

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
  if (e.schedule.policy == "custom" && !by_stage.count("schedule"))
    throw ConfigError(e.where("schedule.policy") + ": custom, but no additional_override replaces stage 'schedule'",
                      "expected an override such as one_cycle or cyclic (plugin schedules) in overrides:",
                      "overrides: [{plugin: one_cycle}]");
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

void copy_weights(Network& from, Network& into) {
  at::NoGradGuard no_grad;
  auto params = from.named_parameters();
  for (auto& p : into.named_parameters()) p.value().copy_(params[p.key()]);
  auto buffers = from.named_buffers();
  for (auto& b : into.named_buffers()) b.value().copy_(buffers[b.key()]);
}

}  // namespace trainyard::host
