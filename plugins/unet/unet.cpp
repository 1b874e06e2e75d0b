// U-Net (Ronneberger, Fischer and Brox, 2015): `depth` levels of two 3x3
// convolutions (batch norm, ReLU) each followed by 2x2 max pooling, a
// bottleneck, then `depth` levels that upsample by a 2x2 transposed
// convolution, concatenate the encoder's features of that size (the skip
// connection) and apply two 3x3 convolutions; a 1x1 convolution gives each
// pixel's class scores. Padded convolutions: the output has the input's size.
// Channels start at `width` and double at each level (levels.h, which the
// centernet plugin's backbone shares).
//
// With decoder_stride S > 1 the decoder stops at 1/S of the input's size and
// the class scores are upsampled bilinearly to the input's size (the head of
// FCN and DeepLab). The full-size levels cost the most and, with their
// skip connections, let a network lower the loss from local contrast alone:
// on the scene set (garments on photographs) the full decoder found the
// items but named them at chance for epochs, while one stopping at stride 4
// learned the garments from its first epoch (docs/performance.md).
#include "unet.h"

#include <torch/nn/modules/conv.h>
#include <trainyard/error.h>

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "levels.h"

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
    int64_t skipped_levels = 0;  // full-size levels the decoder leaves out: log2(decoder_stride)
    while ((int64_t{1} << skipped_levels) < o.decoder_stride) ++skipped_levels;
    if ((int64_t{1} << skipped_levels) != o.decoder_stride || skipped_levels > o.depth)
      throw trainyard::ConfigError(
          "network.decoder_stride: " + std::to_string(o.decoder_stride) + " is not a stride the decoder passes through",
          "expected a power of 2 from 1 to 2^depth = " + std::to_string(int64_t{1} << o.depth), "");
    levels_.emplace(*this, LevelOptions{o.depth, o.width, skipped_levels, o.batch_norm}, c);
    classes_ = torch::nn::Conv2d(torch::nn::Conv2dOptions(levels_->out_channels(), c.dataset.num_classes, 1));
    upsample_ = o.decoder_stride > 1;
    register_module("classes", classes_);
  }
  at::Tensor forward(const trainyard::Batch& batch) override {
    const at::Tensor x = classes_->forward(levels_->forward(batch.input));
    if (!upsample_) return x;
    const auto& input = batch.input;
    return at::upsample_bilinear2d(x, {input.size(-2), input.size(-1)}, /*align_corners=*/false);
  }

 private:
  std::optional<Levels> levels_;  // registers its modules first: the keys' order is the paper network's
  torch::nn::Conv2d classes_{nullptr};
  bool upsample_ = false;
};

}  // namespace

trainyard::Schema schema() { return typed_schema().schema(); }

std::shared_ptr<trainyard::Network> make(const trainyard::Options& options, const trainyard::Context& context) {
  return std::make_shared<Unet>(typed_schema().bind(options), context);
}

}  // namespace unet
