#include "trainyard/sync_batch_norm.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/functional/batchnorm.h>

namespace trainyard {

namespace {

// y = (x - mean) * invstd * weight + bias with mean and invstd of the global
// batch; backward needs the global sums of dy and dy * xhat.
struct SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
  // `count` (the global batch's values per channel) stays a tensor: reading it
  // back would make the host wait for the GPU at every layer.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& mean, const at::Tensor& invstd,
                            const at::Tensor& count, int64_t collectives) {
    at::Tensor xhat = (x - mean.view({1, -1, 1, 1})) * invstd.view({1, -1, 1, 1});
    ctx->save_for_backward({xhat, weight, invstd, count});
    ctx->saved_data["collectives"] = collectives;
    return xhat * weight.view({1, -1, 1, 1}) + bias.view({1, -1, 1, 1});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor &xhat = saved[0], &weight = saved[1], &invstd = saved[2], &count = saved[3];
    const at::Tensor dy = grads[0].to(xhat.scalar_type());
    const auto* collectives = reinterpret_cast<const Collectives*>(ctx->saved_data["collectives"].toInt());
    at::Tensor sum_dy = dy.sum({0, 2, 3});
    at::Tensor sum_dy_xhat = (dy * xhat).sum({0, 2, 3});
    // Parameter gradients stay local: the gradient average over ranks sums them.
    at::Tensor dweight = sum_dy_xhat.clone(), dbias = sum_dy.clone();
    at::Tensor sums = at::cat({sum_dy, sum_dy_xhat});
    collectives->all_reduce_sum(sums);
    const int64_t c = weight.numel();
    const at::Tensor n = count.to(sums.scalar_type());
    at::Tensor mean_dy = (sums.narrow(0, 0, c) / n).view({1, -1, 1, 1});
    at::Tensor mean_dy_xhat = (sums.narrow(0, c, c) / n).view({1, -1, 1, 1});
    at::Tensor dx = (weight * invstd).view({1, -1, 1, 1}) * (dy - mean_dy - xhat * mean_dy_xhat);
    return {dx, dweight, dbias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

SyncBatchNormStatistics sync_batch_norm_statistics(const at::Tensor& x, const Collectives& collectives) {
  at::NoGradGuard no_grad;
  const int64_t c = x.size(1), world = collectives.world_size();
  const int64_t n = c > 0 ? x.numel() / c : 0;
  // Row `rank` of a [world, 1 + 2c] table: this rank's count, per-channel
  // mean and sum of squared deviations (M2), from float32 values (a float16
  // x*x overflows above 256, and a float16 count above 65504). The other
  // rows are zero, so one all-reduce sum gathers every rank's row.
  at::Tensor table = at::zeros({world, 1 + 2 * c}, x.options().dtype(at::kDouble));
  at::Tensor row = table.select(0, collectives.rank());
  if (n > 0) {
    auto [var, mean] = at::var_mean(x.to(at::kFloat), {0, 2, 3}, /*correction=*/0, /*keepdim=*/false);
    row.narrow(0, 0, 1).fill_(static_cast<double>(n));
    row.narrow(0, 1, c).copy_(mean);
    row.narrow(0, 1 + c, c).copy_(var.to(at::kDouble) * static_cast<double>(n));
  }
  collectives.all_reduce_sum(table);
  table = table.to(x.device());
  // Chan, Golub and LeVeque's combination of the ranks' (count, mean, M2):
  // the deviations of the ranks' means from the global mean are formed
  // directly, so nothing cancels. Every rank computes it from the same table.
  const at::Tensor counts = table.select(1, 0).unsqueeze(1);  // [world, 1]
  const at::Tensor means = table.narrow(1, 1, c), m2 = table.narrow(1, 1 + c, c);
  SyncBatchNormStatistics s;
  s.count = counts.sum();
  s.mean = (means * counts).sum(0) / s.count;
  s.m2 = m2.sum(0) + ((means - s.mean).square() * counts).sum(0);
  return s;
}

SyncBatchNorm2dImpl::SyncBatchNorm2dImpl(int64_t channels, const Collectives* collectives, double eps, double momentum)
    : collectives_(collectives), eps_(eps), momentum_(momentum) {
  weight_ = register_parameter("weight", at::ones({channels}));
  bias_ = register_parameter("bias", at::zeros({channels}));
  running_mean_ = register_buffer("running_mean", at::zeros({channels}));
  running_var_ = register_buffer("running_var", at::ones({channels}));
  num_batches_tracked_ = register_buffer("num_batches_tracked", at::zeros({}, at::kLong));
}

at::Tensor SyncBatchNorm2dImpl::forward(const at::Tensor& x) {
  if (!is_training() || !collectives_ || collectives_->world_size() == 1)
    return torch::nn::functional::batch_norm(x, running_mean_, running_var_,
                                             torch::nn::functional::BatchNormFuncOptions()
                                                 .weight(weight_)
                                                 .bias(bias_)
                                                 .training(is_training())
                                                 .momentum(momentum_)
                                                 .eps(eps_));
  const SyncBatchNormStatistics s = sync_batch_norm_statistics(x, *collectives_);
  const at::Tensor var = s.m2 / s.count;  // biased, as BatchNorm normalizes
  at::Tensor mean = s.mean.to(at::kFloat), invstd = (var + eps_).rsqrt().to(at::kFloat);
  {
    at::NoGradGuard no_grad;
    const at::Tensor unbiased = s.m2 / (s.count - 1).clamp_min(1);  // as BatchNorm's running_var
    running_mean_.mul_(1 - momentum_).add_(s.mean.to(running_mean_.scalar_type()), momentum_);
    running_var_.mul_(1 - momentum_).add_(unbiased.to(running_var_.scalar_type()), momentum_);
    num_batches_tracked_.add_(1);
  }
  return SyncBatchNormFunction::apply(x, weight_, bias_, mean, invstd, s.count.to(at::kFloat),
                                      static_cast<int64_t>(reinterpret_cast<intptr_t>(collectives_)));
}

}  // namespace trainyard
