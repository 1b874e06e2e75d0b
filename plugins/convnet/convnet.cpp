// A small convolutional network: blocks of (conv, batch norm, ReLU) x N then
// 2x2 pooling, then dropout and a classifier with an optional hidden layer
// (or an embedding head, optionally L2-normalized, for metric learning).
#include "convnet.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <trainyard/embedding_head.h>
#include <trainyard/error.h>
#include <trainyard/sync_batch_norm.h>

namespace convnet {
namespace {

// The options, bound to the schema below (which holds their defaults).
struct ConvNetOptions : trainyard::EmbeddingHead {
  std::vector<int64_t> channels;
  int64_t convs_per_block = 0;
  int64_t kernel_size = 0;
  bool batch_norm = false;
  double bn_epsilon = 0, bn_momentum = 0;
  std::string pool;
  double dropout = 0;
  int64_t hidden = 0;
};

const trainyard::TypedSchema<ConvNetOptions>& typed_schema() {
  static const trainyard::TypedSchema<ConvNetOptions> s = [] {
    using O = ConvNetOptions;
    trainyard::TypedSchema<O> t;
    t.add("channels", &O::channels, {32, 64}, "output channels of each block; each block halves the size").min(1);
    t.add("convs_per_block", &O::convs_per_block, 1, "convolutions in each block").range(1, 8);
    t.add("kernel_size", &O::kernel_size, 3, "convolution kernel size; odd, so that padding keeps the size")
        .range(1, 11);
    t.add("batch_norm", &O::batch_norm, true, "batch norm after each convolution");
    t.add("bn_epsilon", &O::bn_epsilon, 1e-5, "batch norm epsilon").range(0.0, 1.0);
    t.add("bn_momentum", &O::bn_momentum, 0.1,
          "batch norm running-statistics momentum (PyTorch's convention: weight of the new batch)")
        .range(0.0, 1.0);
    t.add("pool", &O::pool, "max", "pooling at the end of each block").one_of({"max", "avg"});
    t.add("dropout", &O::dropout, 0.25, "dropout before the classifier").range(0.0, 0.99);
    t.add("hidden", &O::hidden, 128, "hidden units in the classifier; 0 for a linear classifier").min(0);
    trainyard::EmbeddingHead::add_options(t);  // embedding_size, normalize
    return t;
  }();
  return s;
}

class ConvNet : public trainyard::Network, public trainyard::NetworkOutputs {
 public:
  ConvNet(const ConvNetOptions& o, const trainyard::Context& c) : head_(o) {
    const auto& shape = c.dataset.sample_shape;
    if (shape.size() != 3)
      throw trainyard::ConfigError(
          "convnet needs image inputs",
          "expected a sample shape [channels, height, width], got " + std::to_string(shape.size()) + " dimensions",
          "use a network like mlp for flat inputs");
    if (c.dataset.num_classes <= 0)
      throw trainyard::ConfigError("the dataset reports no classes", "expected a classification dataset", "");
    int64_t channels = shape[0], h = shape[1], w = shape[2];
    const int64_t k = o.kernel_size;
    if (k % 2 == 0)
      throw trainyard::ConfigError("kernel_size " + std::to_string(k) + " is even",
                                   "expected an odd kernel size (padding k/2 keeps the image size)", "use 3, 5 or 7");
    const bool bn = o.batch_norm;
    const double eps = o.bn_epsilon, momentum = o.bn_momentum;
    const bool max_pool = o.pool == "max";
    for (int64_t out : o.channels) {
      for (int64_t i = 0; i < o.convs_per_block; ++i) {
        features_->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, out, k).padding(k / 2).bias(!bn)));
        if (bn && c.sync_batch_norm && c.collectives)
          features_->push_back(trainyard::SyncBatchNorm2d(out, c.collectives, eps, momentum));
        else if (bn)
          features_->push_back(torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(out).eps(eps).momentum(momentum)));
        features_->push_back(torch::nn::ReLU());
        channels = out;
      }
      if (h < 2 || w < 2)
        throw trainyard::ConfigError(
            "too many pooling blocks for a " + std::to_string(shape[1]) + "x" + std::to_string(shape[2]) + " input",
            "expected at most log2(size) blocks", "remove entries from channels");
      if (max_pool)
        features_->push_back(torch::nn::MaxPool2d(2));
      else
        features_->push_back(torch::nn::AvgPool2d(2));
      h /= 2, w /= 2;
    }
    int64_t width = channels * h * w;
    if (o.dropout > 0) classifier_->push_back(torch::nn::Dropout(o.dropout));
    if (o.hidden > 0) {
      classifier_->push_back(torch::nn::Linear(width, o.hidden));
      classifier_->push_back(torch::nn::ReLU());
      width = o.hidden;
    }
    // The last layer: class scores, or an embedding head of embedding_size outputs.
    classifier_->push_back(torch::nn::Linear(width, head_.outputs(c.dataset.num_classes)));
    register_module("features", features_);
    register_module("classifier", classifier_);
  }
  at::Tensor forward(const trainyard::Batch& batch) override {
    return head_.apply(classifier_->forward(features_->forward(batch.input).flatten(1)));
  }
  trainyard::OutputKind output_kind() const override { return head_.kind(); }

 private:
  torch::nn::Sequential features_, classifier_;
  trainyard::EmbeddingHead head_;
};

}  // namespace

trainyard::Schema schema() { return typed_schema().schema(); }

std::shared_ptr<trainyard::Network> make(const trainyard::Options& options, const trainyard::Context& context) {
  return std::make_shared<ConvNet>(typed_schema().bind(options), context);
}

}  // namespace convnet
