// Residual networks (He et al., "Deep Residual Learning", 2015).
//
// ImageNet-style depths 18/34 use basic blocks, 50/101/152 bottleneck blocks
// (stride on the 3x3 convolution, as torchvision's v1.5), a 7x7 stride-2 stem
// and max pooling; parameter names follow torchvision's (conv1, bn1,
// layer1.0.conv1, ..., fc) so regexes written for it apply. CIFAR-style depths
// 6n+2 use three stages of n basic blocks at 16/32/64 channels and, as in the
// paper, parameter-free shortcuts that subsample and zero-pad channels.
#include "resnet.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <trainyard/embedding_head.h>
#include <trainyard/error.h>
#include <trainyard/sync_batch_norm.h>

namespace resnet {
namespace {

struct NormSettings {
  double eps = 1e-5, momentum = 0.1;
  const trainyard::Collectives* sync = nullptr;  ///< synchronized batch norm over these ranks
};

torch::nn::AnyModule make_norm(int64_t channels, const NormSettings& s) {
  if (s.sync) return torch::nn::AnyModule(trainyard::SyncBatchNorm2d(channels, s.sync, s.eps, s.momentum));
  return torch::nn::AnyModule(
      torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(channels).eps(s.eps).momentum(s.momentum)));
}

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t k, int64_t stride) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).bias(false));
}

enum class Shortcut { projection, pad };

// One residual block: basic (3x3, 3x3) or bottleneck (1x1, 3x3, 1x1 x4).
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int64_t in, int64_t width, int64_t stride, bool bottleneck, Shortcut shortcut, const NormSettings& ns,
            double last_gamma)
      : stride_(stride) {
    const int64_t out = bottleneck ? width * 4 : width;
    std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> layers;  // in, out, kernel, stride
    if (bottleneck)
      layers = {{in, width, 1, 1}, {width, width, 3, stride}, {width, out, 1, 1}};
    else
      layers = {{in, width, 3, stride}, {width, out, 3, 1}};
    for (size_t i = 0; i < layers.size(); ++i) {
      auto [ci, co, k, s] = layers[i];
      convs_.push_back(register_module("conv" + std::to_string(i + 1), conv(ci, co, k, s)));
      norms_.push_back(make_norm(co, ns));
      register_module("bn" + std::to_string(i + 1), norms_.back().ptr());
    }
    // The last batch norm's scale decides how much the block adds at first
    // (0: every block starts as the identity; Goyal et al. 2017).
    at::NoGradGuard no_grad;
    norms_.back().ptr()->named_parameters(false)["weight"].fill_(last_gamma);
    if (in != out || stride != 1) {
      if (shortcut == Shortcut::projection) {
        downsample_->push_back(conv(in, out, 1, stride));
        downsample_->push_back(make_norm(out, ns));
        register_module("downsample", downsample_);
      } else {
        pad_ = out - in;
      }
    }
  }

  at::Tensor forward(at::Tensor x) {
    at::Tensor y = x;
    for (size_t i = 0; i < convs_.size(); ++i) {
      y = norms_[i].forward(convs_[i]->forward(y));
      if (i + 1 < convs_.size()) y = y.relu();
    }
    at::Tensor identity = x;
    if (!downsample_->is_empty()) {
      identity = downsample_->forward(x);
    } else if (stride_ != 1 || pad_ > 0) {
      using at::indexing::Slice;
      identity = x.index({Slice(), Slice(), Slice(at::indexing::None, at::indexing::None, stride_),
                          Slice(at::indexing::None, at::indexing::None, stride_)});
      if (pad_ > 0) identity = at::constant_pad_nd(identity, {0, 0, 0, 0, pad_ / 2, pad_ - pad_ / 2});
    }
    return (y + identity).relu();
  }

 private:
  int64_t stride_ = 1, pad_ = 0;
  std::vector<torch::nn::Conv2d> convs_;
  std::vector<torch::nn::AnyModule> norms_;
  torch::nn::Sequential downsample_;
};
TORCH_MODULE(Block);

const std::vector<int64_t> kImageNetDepths{18, 34, 50, 101, 152};

std::vector<int64_t> imagenet_blocks(int64_t depth) {
  switch (depth) {
    case 18:
      return {2, 2, 2, 2};
    case 34:
      return {3, 4, 6, 3};
    case 50:
      return {3, 4, 6, 3};
    case 101:
      return {3, 4, 23, 3};
    default:
      return {3, 8, 36, 3};  // 152
  }
}

// The options, bound to the schema below (which holds their defaults).
struct ResNetOptions : trainyard::EmbeddingHead {
  int64_t depth = 0;
  int64_t width = 0;
  bool small_input = false;
  std::string shortcut;
  double bn_epsilon = 0, bn_momentum = 0;
  double bn_init_gamma = 0;
  double dropout = 0;
};

const trainyard::TypedSchema<ResNetOptions>& typed_schema() {
  static const trainyard::TypedSchema<ResNetOptions> s = [] {
    using O = ResNetOptions;
    trainyard::TypedSchema<O> t;
    t.add("depth", &O::depth, 20,
          "18, 34, 50, 101, 152 (ImageNet-style) or 6n+2 such as 20, 32, 44, 56, 110 (CIFAR-style)")
        .min(8);
    t.add("width", &O::width, 0,
          "channels of the first stage, doubled at each stage; 0: 64 ImageNet-style, 16 CIFAR-style")
        .min(0);
    t.add("small_input", &O::small_input, false,
          "ImageNet-style depths: a 3x3 stride-1 stem without max pooling, for 28-64 px images");
    t.add("shortcut", &O::shortcut, "auto",
          "where the shape changes: projection (1x1 conv + batch norm), pad (subsample, zero "
          "channels; no parameters), auto (pad CIFAR-style, projection ImageNet-style)")
        .one_of({"auto", "projection", "pad"});
    t.add("bn_epsilon", &O::bn_epsilon, 1e-5, "batch norm epsilon").range(0.0, 1.0);
    t.add("bn_momentum", &O::bn_momentum, 0.1,
          "batch norm running-statistics momentum (PyTorch's convention: weight of the new batch)")
        .range(0.0, 1.0);
    t.add("bn_init_gamma", &O::bn_init_gamma, 1.0,
          "initial scale of the last batch norm in each residual block; 0 starts blocks as "
          "the identity (zero-gamma init)");
    t.add("dropout", &O::dropout, 0.0, "dropout before the classifier").range(0.0, 0.99);
    trainyard::EmbeddingHead::add_options(t);  // embedding_size, normalize
    return t;
  }();
  return s;
}

class ResNet : public trainyard::Network, public trainyard::NetworkOutputs {
 public:
  ResNet(const ResNetOptions& o, const trainyard::Context& c) : head_(o) {
    const auto& shape = c.dataset.sample_shape;
    if (shape.size() != 3)
      throw trainyard::ConfigError(
          "resnet needs image inputs",
          "expected a sample shape [channels, height, width], got " + std::to_string(shape.size()) + " dimensions",
          "use a network like mlp for flat inputs");
    if (c.dataset.num_classes <= 0)
      throw trainyard::ConfigError("the dataset reports no classes", "expected a classification dataset", "");
    const int64_t depth = o.depth;
    const bool imagenet = std::count(kImageNetDepths.begin(), kImageNetDepths.end(), depth) > 0;
    if (!imagenet && (depth < 8 || (depth - 2) % 6 != 0))
      throw trainyard::ConfigError("resnet depth " + std::to_string(depth) + " is not a known depth",
                                   "expected 18, 34, 50, 101, 152 (ImageNet-style) or 6n+2 (CIFAR-style: 20, 32, "
                                   "44, 56, 110, ...)",
                                   "network.depth: 20");
    NormSettings ns;
    ns.eps = o.bn_epsilon;
    ns.momentum = o.bn_momentum;
    if (c.sync_batch_norm && c.collectives) ns.sync = c.collectives;
    const double gamma = o.bn_init_gamma;
    const std::string& shortcut_name = o.shortcut;
    const Shortcut shortcut =
        shortcut_name == "projection" || (shortcut_name == "auto" && imagenet) ? Shortcut::projection : Shortcut::pad;
    int64_t width = o.width;
    if (width == 0) width = imagenet ? 64 : 16;
    const bool small = !imagenet || o.small_input;
    const bool bottleneck = imagenet && depth >= 50;

    // Stem: 7x7 stride 2 and max pooling for large images, 3x3 stride 1 for small ones.
    conv1_ = register_module("conv1", small ? conv(shape[0], width, 3, 1) : conv(shape[0], width, 7, 2));
    bn1_ = make_norm(width, ns);
    register_module("bn1", bn1_.ptr());
    max_pool_ = !small;

    const std::vector<int64_t> blocks = imagenet ? imagenet_blocks(depth) : std::vector<int64_t>(3, (depth - 2) / 6);
    int64_t in = width;
    for (size_t stage = 0; stage < blocks.size(); ++stage) {
      torch::nn::Sequential layer;
      const int64_t w = width << stage;
      for (int64_t b = 0; b < blocks[stage]; ++b) {
        const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
        layer->push_back(Block(in, w, stride, bottleneck, shortcut, ns, gamma));
        in = bottleneck ? w * 4 : w;
      }
      layers_.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    if (o.dropout > 0) dropout_ = register_module("dropout", torch::nn::Dropout(o.dropout));
    // The last layer: class scores, or an embedding head of embedding_size outputs.
    fc_ = register_module("fc", torch::nn::Linear(in, head_.outputs(c.dataset.num_classes)));

    // He initialization for convolutions (fan out, as torchvision does).
    at::NoGradGuard no_grad;
    for (auto& p : named_parameters())
      if (p.value().dim() == 4) torch::nn::init::kaiming_normal_(p.value(), 0, torch::kFanOut, torch::kReLU);
  }

  at::Tensor forward(const trainyard::Batch& batch) override {
    at::Tensor x = bn1_.forward(conv1_->forward(batch.input)).relu();
    if (max_pool_) x = at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
    for (auto& layer : layers_) x = layer->forward(x);
    x = at::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    if (dropout_) x = dropout_->forward(x);
    return head_.apply(fc_->forward(x));
  }
  trainyard::OutputKind output_kind() const override { return head_.kind(); }

 private:
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::AnyModule bn1_;
  bool max_pool_ = false;
  std::vector<torch::nn::Sequential> layers_;
  torch::nn::Dropout dropout_{nullptr};
  torch::nn::Linear fc_{nullptr};
  trainyard::EmbeddingHead head_;
};

}  // namespace

trainyard::Schema schema() { return typed_schema().schema(); }

std::shared_ptr<trainyard::Network> make(const trainyard::Options& options, const trainyard::Context& context) {
  return std::make_shared<ResNet>(typed_schema().bind(options), context);
}

}  // namespace resnet
