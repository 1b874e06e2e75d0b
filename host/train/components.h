#pragma once
// Building every component of an experiment from its validated options.
#include <memory>
#include <optional>
#include <vector>

#include "config/experiment.h"
#include "plugins/facets.h"
#include "trainyard/callback.h"
#include "trainyard/dataset.h"
#include "trainyard/loss.h"
#include "trainyard/meter.h"
#include "trainyard/network.h"
#include "trainyard/optimizer.h"
#include "trainyard/override.h"

namespace trainyard::host {

/// A component as built: its settings, the object its factory made, and
/// what the object offers beyond its kind's interface (resolved once, when it
/// is built: plugins/facets.h).
template <class T>
struct Built {
  const ComponentConfig* config = nullptr;
  std::shared_ptr<T> object;
  Facets facets = {};
};

/// One optimizer parameter group as built (for `trainyard validate`).
struct GroupReport {
  std::string name;  ///< "default", "param_groups[0] (match 'bias$')", "no decay (1-d)"
  std::vector<std::string> parameters;
  int64_t numel = 0;
  double lr = 0;
  std::string weight_decay;  ///< "optimizer's" or the value
};

struct Components {
  Built<Dataset> train_data, test_data;  ///< test_data.object may be null
  Built<Network> network;
  Built<Loss> loss;
  Built<Optimizer> optimizer_plugin;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::vector<GroupReport> groups;
  std::vector<std::shared_ptr<torch::nn::Module>> frozen;  ///< kept in eval mode while training
  std::vector<Built<Meter>> train_meters, test_meters;
  std::vector<Built<Callback>> callbacks;            ///< sorted by priority (stable)
  std::vector<Built<AdditionalOverride>> overrides;  ///< in install order
};

/// One dataset built as build_components builds it (its size checked, its
/// facets resolved), for a command that needs only the data (`iterate`).
Built<Dataset> build_dataset(const ComponentConfig& config, const Context& context);

/// Builds datasets first (their info goes into the context), then the network
/// (moved to the context's device, initialized from `pretrained:` if given),
/// loss, optimizer over the network's parameters, meters, callbacks and
/// overrides. Checks override conflicts. Throws ConfigError or ComponentFailure.
/// Takes the whole Experiment: it is the assembler, and reads every
/// component entry (and schedule.policy, to require a custom schedule's override).
Components build_components(const Experiment& experiment, Context& context);

/// Checks network.trainable and network.freeze against a built network
/// without changing it (a later stage's settings, before the first trains).
void check_network_settings(const ComponentConfig& network_config, Network& network);

/// A later stage starts from the weights the earlier one ends with
/// (copy_weights copies every parameter and buffer by name):
/// throws ConfigError when `later` holds a name that `earlier` (stage
/// `earlier_stage`, 0-based) lacks or holds with another shape.
void check_weights_carry_over(const Network& later, const Network& earlier, size_t earlier_stage);
/// Copies every parameter and buffer of `from` into the same-named one of
/// `into` (a stage starting where the earlier one ended).
void copy_weights(Network& from, Network& into);

/// The dataset's Dataset::input_normalization(), asked only when `facets`
/// says its plugin has it (SDK 1.2 or later: an older one has no such
/// virtual function to call); failures name `config`.
std::optional<InputNormalization> input_normalization(const ComponentConfig& config, const Dataset& dataset,
                                                      const Facets& facets);

/// What the network says its rows are (SDK 1.4 NetworkOutputs): class scores
/// or embeddings; nullopt for a network that does not say.
std::optional<OutputKind> network_output_kind(const Built<Network>& network);

/// The dataset's Dataset::streamed() (false for plugins before SDK 1.2).
bool dataset_streamed(const ComponentConfig& config, const Dataset& dataset, const Facets& facets);

/// Parameters the network has: {count, trainable}.
std::pair<int64_t, int64_t> parameter_count(Network& network);

}  // namespace trainyard::host
