#include "levels.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <trainyard/error.h>
#include <trainyard/sync_batch_norm.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace unet {

Levels::Levels(torch::nn::Module& owner, const LevelOptions& o, const trainyard::Context& c) {
  const auto& shape = c.dataset.sample_shape;  // [channels, height, width]: the networks check
  const int64_t multiple = int64_t{1} << o.depth;
  if (shape[1] % multiple != 0 || shape[2] % multiple != 0)
    throw trainyard::ConfigError("a " + std::to_string(shape[1]) + "x" + std::to_string(shape[2]) +
                                     " input does not halve " + std::to_string(o.depth) + " times",
                                 "expected a height and width divisible by 2^depth = " + std::to_string(multiple),
                                 "crop or resize the images to a multiple, or lower depth");
  auto block = [&](int64_t in, int64_t out) {
    torch::nn::Sequential b;
    for (int64_t i = 0; i < 2; ++i, in = out) {
      b->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1).bias(!o.batch_norm)));
      if (o.batch_norm && c.sync_batch_norm && c.collectives)
        b->push_back(trainyard::SyncBatchNorm2d(out, c.collectives));
      else if (o.batch_norm)
        b->push_back(torch::nn::BatchNorm2d(out));
      b->push_back(torch::nn::ReLU());
    }
    return b;
  };
  int64_t channels = shape[0], width = o.width;
  for (int64_t level = 0; level < o.depth; ++level, width *= 2) {
    down_->push_back(block(channels, width));
    channels = width;
  }
  bottom_ = block(channels, width);
  for (int64_t level = o.depth - 1; level >= o.stop_level; --level) {
    up_->push_back(torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(width, width / 2, 2).stride(2)));
    merge_->push_back(block(width, width / 2));  // width / 2 upsampled + width / 2 from the skip
    width /= 2;
  }
  out_channels_ = width;
  owner.register_module("down", down_);
  owner.register_module("bottom", bottom_);
  owner.register_module("up", up_);
  owner.register_module("merge", merge_);
}

at::Tensor Levels::forward(const at::Tensor& input) {
  std::vector<at::Tensor> skips;
  at::Tensor x = input;
  for (const auto& level : *down_) {
    x = level->as<torch::nn::Sequential>()->forward(x);
    skips.push_back(x);
    x = at::max_pool2d(x, {2, 2});
  }
  x = bottom_->forward(x);
  for (size_t i = 0; i < up_->size(); ++i) {
    x = up_[i]->as<torch::nn::ConvTranspose2d>()->forward(x);
    x = merge_[i]->as<torch::nn::Sequential>()->forward(at::cat({skips[skips.size() - 1 - i], x}, 1));
  }
  return x;
}

}  // namespace unet
