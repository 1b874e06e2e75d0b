#pragma once
/// Batch norm whose statistics are computed over the whole global batch of a
/// multi-process run. In training, each rank computes its count, mean and sum
/// of squared deviations per channel in float32 (whatever dtype autocast gave
/// the input), the ranks' rows are combined in double with Chan's parallel
/// formula (no E[x^2] - E[x]^2 cancellation), and the backward pass sums the
/// gradient terms, so the result equals one process normalizing the global
/// batch. One all-reduce each way, and no read back to the host. Without
/// collectives (one process) or in eval mode it is torch::nn::BatchNorm2d. Parameter and buffer names are BatchNorm2d's, so
/// checkpoints move between the two.
///
/// Example (in a network's constructor):
///   if (context.sync_batch_norm && context.collectives)
///     layers_->push_back(trainyard::SyncBatchNorm2d(channels, context.collectives));
///   else
///     layers_->push_back(torch::nn::BatchNorm2d(channels));

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "trainyard/collectives.h"

namespace trainyard {

/// The global batch's per-channel statistics, as SyncBatchNorm2d computes
/// them in training: `count` values per channel (a scalar), their `mean` and
/// the sum of squared deviations `m2` ([C] each), all float64, on x's device.
/// Every rank of `collectives` must call it (one all-reduce).
struct SyncBatchNormStatistics {
  at::Tensor count, mean, m2;
};
SyncBatchNormStatistics sync_batch_norm_statistics(const at::Tensor& x, const Collectives& collectives);

class SyncBatchNorm2dImpl : public torch::nn::Module {
 public:
  SyncBatchNorm2dImpl(int64_t channels, const Collectives* collectives, double eps = 1e-5, double momentum = 0.1);
  at::Tensor forward(const at::Tensor& input);

 private:
  const Collectives* collectives_;
  double eps_, momentum_;
  at::Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

TORCH_MODULE(SyncBatchNorm2d);

}  // namespace trainyard
