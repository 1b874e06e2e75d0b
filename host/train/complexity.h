#pragma once
// What a network costs per sample, module by module: forward FLOPs, the
// parameters, the output shape and its bytes. Shown by `--dry-run` and
// `validate`, totals in provenance.json.
//
// Counted by trainyard itself from the autograd graph of one sample's
// forward (LibTorch's C++ modules have no forward hooks, and the profiler's
// FLOP counts are per operator, not per module): every operation that takes
// a weight of 2 or more dimensions (linear: addmm or mm; convolution) costs
// 2 x (multiply-adds) = 2 x output values x (weight values / output
// channels), and belongs to the module that owns the weight. Not counted:
// element-wise work (activations, normalization, pooling, additions),
// which torch.utils.flop_counter and fvcore's defaults leave out too.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/sections.h"
#include "train/components.h"

namespace trainyard::host {

struct ModuleCost {
  std::string name;        ///< "layers.0"; "" for the whole network
  std::string type;        ///< "Linear", "Conv2d", "Sequential" (short_type)
  int depth = 0;           ///< 0 for the network, 1 for its children, ...
  int64_t parameters = 0;  ///< its own and its submodules'
  int64_t flops = 0;       ///< forward FLOPs for one sample, its own and its submodules'
  /// One sample's output shape ({256}); none where the graph does not show it.
  std::optional<std::vector<int64_t>> output_sizes;
  int64_t output_bytes = -1;  ///< that output's bytes in fp32, -1 where unknown
};

struct NetworkCost {
  std::vector<ModuleCost> modules;  ///< the network first, then named_modules() order
  int64_t flops = 0;                ///< forward, one sample
  /// One sample's outputs of the layers with weights (the leaves that show
  /// them), fp32: most of what a backward keeps per sample.
  int64_t activation_bytes = 0;
};

/// One sample of the training split through the network, in eval mode with
/// gradients recorded (nothing learns: no backward, batch norm and dropout
/// as in evaluation), in fp32. Leaves the global random generator as it was.
/// The sample is read with the loop's loader settings and the run's seed.
NetworkCost network_cost(const LoopConfig& loop, uint64_t seed, const Components& components, const Context& context);

/// As network_cost, or nullopt with the reason in `why` when one sample's
/// forward fails (a network that needs larger batches): the cost is
/// information, never a reason to stop a run.
std::optional<NetworkCost> try_network_cost(const LoopConfig& loop, uint64_t seed, const Components& components,
                                            const Context& context, std::string& why);

/// "Conv2d" for torch::nn::Conv2dImpl, "Mlp" for mlp::(anonymous namespace)::Mlp.
std::string short_type(const std::string& type);

/// The table: module, type, parameters, FLOPs, output shape and bytes, with
/// the tree's indentation; modules deeper than `max_depth` are left out.
std::string cost_table(const NetworkCost& cost, int max_depth);

/// "2.35 GFLOPs", "412 kFLOPs"; "1.2 MB", "96 kB".
std::string human_flops(int64_t flops);
std::string human_bytes(int64_t bytes);

}  // namespace trainyard::host
