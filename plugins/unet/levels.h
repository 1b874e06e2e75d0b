#pragma once
// The U-Net's levels, shared by the unet and centernet plugins (centernet's
// backbone is this encoder with the decoder stopped at stride 4). `depth`
// levels of two 3x3 convolutions (batch norm, ReLU) each followed by 2x2 max
// pooling, a bottleneck, then levels that upsample by a 2x2 transposed
// convolution, concatenate the encoder's features of that size (the skip
// connection) and apply two 3x3 convolutions, up to 1/2^stop_level of the
// input's size. Channels start at `width` and double at each level.
//
// The modules are registered on the network that owns the levels, under the
// names "down", "bottom", "up" and "merge": checkpoints and exported state
// dicts keep the keys both networks always had.
#include <cstdint>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <trainyard/context.h>

namespace unet {

struct LevelOptions {
  int64_t depth = 0;       ///< poolings in the encoder
  int64_t width = 0;       ///< channels of the first level
  int64_t stop_level = 0;  ///< the decoder stops at 1/2^stop_level of the input's size (0: full size)
  bool batch_norm = true;  ///< after each 3x3 convolution (synchronized across ranks when the run asks)
};

class Levels {
 public:
  /// Checks that the context's [channels, height, width] samples halve
  /// `depth` times (a ConfigError if not) and registers the modules on owner.
  Levels(torch::nn::Module& owner, const LevelOptions& options, const trainyard::Context& context);
  /// The decoder's last features: [B, out_channels(), H / 2^stop_level, W / 2^stop_level].
  at::Tensor forward(const at::Tensor& input);
  int64_t out_channels() const { return out_channels_; }

 private:
  torch::nn::ModuleList down_, up_, merge_;
  torch::nn::Sequential bottom_;
  int64_t out_channels_ = 0;
};

}  // namespace unet
