#pragma once
/// Loss components: network outputs and a batch in, one scalar out.
///
/// Example:
///   class L1 : public trainyard::Loss {
///     at::Tensor compute(const at::Tensor& out, const trainyard::Batch& b) override {
///       return (out - b.target).abs().mean();
///     }
///   };

#include <map>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "trainyard/batch.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace trainyard {

class Loss {
 public:
  virtual ~Loss();
  /// A scalar (0-dim) tensor that requires grad when `output` does.
  virtual at::Tensor compute(const at::Tensor& output, const Batch& batch) = 0;
};

/// Since SDK 1.3, optional: a loss that compares the network's outputs with
/// one another (metric learning: triplet, contrastive) rather than scoring
/// classes also derives from EmbeddingLoss. The host then asks the network
/// for one embedding per sample, `[batch, size]` of any size, instead of one
/// score per class. Found with dynamic_cast.
///
/// Example:
///   class Triplet : public trainyard::Loss, public trainyard::EmbeddingLoss { ... };
class EmbeddingLoss {
 public:
  virtual ~EmbeddingLoss();
};

/// Since SDK 1.4, optional: a loss that reports values about its last
/// compute() (how many triplets mining kept, the fraction of them with a
/// loss above zero) derives from LossValues too. The host averages each
/// value over a phase's steps, weighted by batch size and summed over ranks,
/// and reports it as a meter value with the phase's prefix (`train_<name>`,
/// `test_<name>`), in metrics.jsonl, the console and for stopping rules.
/// Found with dynamic_cast.
///
/// Keep the values as 0-dim tensors on the loss's device: the host reads
/// them only at the log interval and at a phase's end, so a GPU is not made
/// to wait at every step. Return the same names every time, also before the
/// first compute() (zeros then): the host reads the names once, when the
/// loss is built.
///
/// Example:
///   std::map<std::string, at::Tensor> last_values() const override {
///     return {{"active_triplets", active_}, {"mined_triplets", mined_}};
///   }
class LossValues {
 public:
  virtual ~LossValues();
  /// Values of the last compute(), by name (lower-case letters, digits, '_').
  virtual std::map<std::string, at::Tensor> last_values() const = 0;
};

/// Since SDK 1.4, optional: a loss with parameters of its own (ArcFace's
/// class centres, Proxy-NCA's proxies) derives from LossParameters too and
/// returns them as one module, built on the CPU in its constructor. The host
/// trains them with the network: it registers the module under the network
/// as "loss" (parameters `loss.<name>`) and moves it to the run's device, so
/// they join the optimizer's groups (`param_groups` match `loss.` names), the
/// data-parallel gradient average and every checkpoint, and resume exactly.
/// `trainyard export` leaves them out: they are not part of the network a
/// PyTorch user loads. Found with dynamic_cast.
///
/// Example:
///   class CosFace : public trainyard::Loss, public trainyard::EmbeddingLoss, public trainyard::LossParameters {
///     std::shared_ptr<torch::nn::Module> module() override { return centres_; }
///   };
class LossParameters {
 public:
  virtual ~LossParameters();
  virtual std::shared_ptr<torch::nn::Module> module() = 0;
};

}  // namespace trainyard
