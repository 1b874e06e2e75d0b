#pragma once
/// Network components: a torch::nn::Module the host trains.
///
/// Register parameters and submodules in the constructor, in a fixed order
/// (the seed then gives the same weights on every build). forward() receives
/// the whole batch so a network may use several inputs; most read batch.input.
///
/// Example:
///   class Linear : public trainyard::Network {
///    public:
///     Linear(int64_t in, int64_t out) : fc_(register_module("fc", torch::nn::Linear(in, out))) {}
///     at::Tensor forward(const trainyard::Batch& b) override { return fc_(b.input.flatten(1)); }
///    private:
///     torch::nn::Linear fc_;
///   };

#include <string>

#include <torch/nn/module.h>

#include "trainyard/batch.h"

namespace trainyard {

class Network : public torch::nn::Module {
 public:
  ~Network() override;
  /// Outputs for the batch, e.g. logits {batch, classes}.
  /// Before training (and before each stage, eval and predict) the host
  /// calls forward once per split on a few samples in eval mode under
  /// no_grad, to check the output's shape against the dataset (the wiring
  /// check): count calls or change state only in training mode.
  virtual at::Tensor forward(const Batch& batch) = 0;
};

/// What a network's output rows are (SDK 1.4's NetworkOutputs).
enum class OutputKind {
  class_scores,  ///< one score per class (a classification head)
  embeddings,    ///< one embedding per sample, compared with one another (metric learning)
};

/// Since SDK 1.4, optional: a network that knows what its rows are derives
/// from NetworkOutputs too, so that the host can refuse a loss that expects
/// the other kind before training (an embedding loss on a classifier's 10
/// class scores has the shape of a 10-d embedding). Found with dynamic_cast;
/// a network without it is checked by shape alone.
///
/// Example:
///   class Net : public trainyard::Network, public trainyard::NetworkOutputs {
///     trainyard::OutputKind output_kind() const override {
///       return embedding_size_ > 0 ? trainyard::OutputKind::embeddings : trainyard::OutputKind::class_scores;
///     }
///   };
class NetworkOutputs {
 public:
  virtual ~NetworkOutputs();
  virtual OutputKind output_kind() const = 0;
};

/// Optional (added within SDK 1.4): a network built from a TorchScript
/// module derives from ScriptedModule too and names that module's file, so
/// that `trainyard export --format torchscript` writes the module back with
/// the trained values: the host loads the file, copies the network's
/// parameters and buffers into it by name and saves it. Found with
/// dynamic_cast; a network without it exports as a state_dict or safetensors.
///
/// Example:
///   class Scripted : public trainyard::Network, public trainyard::ScriptedModule {
///     std::string script_path() const override { return path_; }  // absolute
///   };
class ScriptedModule {
 public:
  virtual ~ScriptedModule();
  /// The TorchScript file the network was built from (absolute); its
  /// parameters and buffers have the network's names.
  virtual std::string script_path() const = 0;
};

}  // namespace trainyard
