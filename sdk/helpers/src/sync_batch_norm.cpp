#include "trainyard/sync_batch_norm.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/functional/batchnorm.h>

namespace trainyard {

namespace {

// y = (x - mean) * invstd * weight + bias with mean and invstd of the global
// batch; backward needs the global sums of dy and dy * xhat.
struct SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& mean, const at::Tensor& invstd, double count,
                            int64_t collectives) {
    at::Tensor xhat = (x - mean.view({1, -1, 1, 1})) * invstd.view({1, -1, 1, 1});
    ctx->save_for_backward({xhat, weight, invstd});
    ctx->saved_data["count"] = count;
    ctx->saved_data["collectives"] = collectives;
    return xhat * weight.view({1, -1, 1, 1}) + bias.view({1, -1, 1, 1});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor &xhat = saved[0], &weight = saved[1], &invstd = saved[2];
    const at::Tensor dy = grads[0];
    const double count = ctx->saved_data["count"].toDouble();
    const auto* collectives = reinterpret_cast<const Collectives*>(ctx->saved_data["collectives"].toInt());
    at::Tensor sum_dy = dy.sum({0, 2, 3});
    at::Tensor sum_dy_xhat = (dy * xhat).sum({0, 2, 3});
    // Parameter gradients stay local: the gradient average over ranks sums them.
    at::Tensor dweight = sum_dy_xhat.clone(), dbias = sum_dy.clone();
    at::Tensor sums = at::cat({sum_dy, sum_dy_xhat});
    collectives->all_reduce_sum(sums);
    const int64_t c = weight.numel();
    at::Tensor mean_dy = (sums.narrow(0, 0, c) / count).view({1, -1, 1, 1});
    at::Tensor mean_dy_xhat = (sums.narrow(0, c, c) / count).view({1, -1, 1, 1});
    at::Tensor dx = (weight * invstd).view({1, -1, 1, 1}) * (dy - mean_dy - xhat * mean_dy_xhat);
    return {dx, dweight, dbias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

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
    return torch::nn::functional::batch_norm(
        x, running_mean_, running_var_,
        torch::nn::functional::BatchNormFuncOptions().weight(weight_).bias(bias_).training(is_training())
            .momentum(momentum_).eps(eps_));
  // Per-channel count, sum and sum of squares over every rank's batch.
  const int64_t c = x.size(1);
  at::Tensor stats;
  {
    at::NoGradGuard no_grad;
    at::Tensor local_count = at::full({1}, double(x.numel() / std::max<int64_t>(c, 1)), x.options());
    stats = at::cat({x.sum({0, 2, 3}), (x * x).sum({0, 2, 3}), local_count});
    collectives_->all_reduce_sum(stats);
  }
  const double count = stats[2 * c].item<double>();
  at::Tensor mean = stats.narrow(0, 0, c) / count;
  at::Tensor var = (stats.narrow(0, c, c) / count - mean * mean).clamp_min(0);  // biased, as BatchNorm uses
  at::Tensor invstd = (var + eps_).rsqrt();
  {
    at::NoGradGuard no_grad;
    const double unbiased = count > 1 ? count / (count - 1) : 1.0;
    running_mean_.mul_(1 - momentum_).add_(mean, momentum_);
    running_var_.mul_(1 - momentum_).add_(var * unbiased, momentum_);
    num_batches_tracked_.add_(1);
  }
  return SyncBatchNormFunction::apply(x, weight_, bias_, mean, invstd, count,
                                      static_cast<int64_t>(reinterpret_cast<intptr_t>(collectives_)));
}

}  // namespace trainyard
