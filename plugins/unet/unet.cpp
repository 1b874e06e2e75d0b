// U-Net (Ronneberger, Fischer and Brox, 2015): `depth` levels of two 3x3
// convolutions (batch norm, ReLU) each followed by 2x2 max pooling, a
// bottleneck, then `depth` levels that upsample by a 2x2 transposed
// convolution, concatenate the encoder's features of that size (the skip
// connection) and apply two 3x3 convolutions; a 1x1 convolution gives each
// pixel's class scores. Padded convolutions: the output has the input's size.
// Channels start at `width` and double at each level.
//
// With decoder_stride S > 1 the decoder stops at 1/S of the input's size and
// the class scores are upsampled bilinearly to the input's size (the head of
// FCN and DeepLab). The full-size levels cost the most and, with their
// skip connections, let a network lower the loss from local contrast alone:
// on the scene set (garments on photographs) the full decoder found the
// items but named them at chance for epochs, while one stopping at stride 4
// learned the garments from its first epoch (docs/performance.md).
#include "unet.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pooling.h>
#include <trainyard/error.h>
#include <trainyard/sync_batch_norm.h>

namespace unet {
namespace {

struct UnetOptions {
  int64_t depth = 0;
  int64_t width = 0;
  int64_t decoder_stride = 1;
  bool batch_norm = true;
};

const trainyard::TypedSchema<UnetOptions>& typed_schema() {
  static const trainyard::TypedSchema<UnetOptions> s = [] {
    using O = UnetOptions;
    trainyard::TypedSchema<O> t;
    t.add("depth", &O::depth, 3, "poolings in the encoder (the input's height and width must divide by 2^depth)")
        .range(1, 6);
    t.add("width", &O::width, 16, "channels of the first level; each level doubles them (the paper: 64)")
        .range(1, 1024);
    t.add("decoder_stride", &O::decoder_stride, 1,
          "the decoder stops at 1/decoder_stride of the input's size and upsamples the class scores bilinearly (1: "
          "the paper's full-size decoder; a power of 2 up to 2^depth)")
        .range(1, 64);
    t.add("batch_norm", &O::batch_norm, true, "batch norm after each 3x3 convolution");
    return t;
  }();
  return s;
}

class Unet : public trainyard::Network {
 public:
  Unet(const UnetOptions& o, const trainyard::Context& c) {
    const auto& shape = c.dataset.sample_shape;
    if (shape.size() != 3)
      throw trainyard::ConfigError(
          "unet needs image inputs",
          "expected a sample shape [channels, height, width], got " + std::to_string(shape.size()) + " dimensions", "");
    if (c.dataset.num_classes <= 0)
      throw trainyard::ConfigError("the dataset reports no classes",
                                   "expected a segmentation dataset (num_classes > 0: the mask's class count)", "");
    const int64_t multiple = int64_t{1} << o.depth;
    int64_t skipped_levels = 0;  // full-size levels the decoder leaves out: log2(decoder_stride)
    while ((int64_t{1} << skipped_levels) < o.decoder_stride) ++skipped_levels;
    if ((int64_t{1} << skipped_levels) != o.decoder_stride || skipped_levels > o.depth)
      throw trainyard::ConfigError(
          "network.decoder_stride: " + std::to_string(o.decoder_stride) + " is not a stride the decoder passes through",
          "expected a power of 2 from 1 to 2^depth = " + std::to_string(multiple), "");
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
    for (int64_t level = o.depth - 1; level >= skipped_levels; --level) {
      up_->push_back(torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(width, width / 2, 2).stride(2)));
      merge_->push_back(block(width, width / 2));  // width / 2 upsampled + width / 2 from the skip
      width /= 2;
    }
    classes_ = torch::nn::Conv2d(torch::nn::Conv2dOptions(width, c.dataset.num_classes, 1));
    upsample_ = o.decoder_stride > 1;
    register_module("down", down_);
    register_module("bottom", bottom_);
    register_module("up", up_);
    register_module("merge", merge_);
    register_module("classes", classes_);
  }
  at::Tensor forward(const trainyard::Batch& batch) override {
    std::vector<at::Tensor> skips;
    at::Tensor x = batch.input;
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
    x = classes_->forward(x);
    if (!upsample_) return x;
    const auto& input = batch.input;
    return at::upsample_bilinear2d(x, {input.size(-2), input.size(-1)}, /*align_corners=*/false);
  }

 private:
  torch::nn::ModuleList down_, up_, merge_;
  torch::nn::Sequential bottom_;
  torch::nn::Conv2d classes_{nullptr};
  bool upsample_ = false;
};

}  // namespace

trainyard::Schema schema() { return typed_schema().schema(); }

std::shared_ptr<trainyard::Network> make(const trainyard::Options& options, const trainyard::Context& context) {
  return std::make_shared<Unet>(typed_schema().bind(options), context);
}

}  // namespace unet
