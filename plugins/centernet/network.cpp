// The centernet network: the unet plugin's levels with the decoder stopped
// at stride 4 (plugins/unet/levels.h: two 3x3 convolutions, batch norm and
// ReLU per level; 2x2 pooling down, 2x2 transposed convolutions up with the
// encoder's features of that size), then three heads of a 3x3 and a 1x1
// convolution: K class heatmaps, the size, the offset. decode() turns an
// output into detections.
#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <trainyard/error.h>

#include <ATen/ATen.h>

#include <cmath>
#include <optional>

#include "centernet.h"
#include "levels.h"

namespace centernet {
namespace {

struct NetworkOptions {
  int64_t depth = 0;
  int64_t width = 0;
  int64_t head_width = 0;
  int64_t max_detections = 0;
  double score_threshold = 0;
};

const trainyard::TypedSchema<NetworkOptions>& network_typed_schema() {
  static const trainyard::TypedSchema<NetworkOptions> s = [] {
    using O = NetworkOptions;
    trainyard::TypedSchema<O> t;
    t.add("depth", &O::depth, 4,
          "poolings in the encoder (at least 2: the heads work at stride 4; the input's height and width must "
          "divide by 2^depth)")
        .range(2, 6);
    t.add("width", &O::width, 16, "channels of the first level; each level doubles them").range(1, 1024);
    t.add("head_width", &O::head_width, 64, "channels of each head's 3x3 convolution").range(1, 1024);
    t.add("max_detections", &O::max_detections, 100, "detections decoded per image, highest scores (COCO's 100)")
        .range(1, 10000);
    t.add("score_threshold", &O::score_threshold, 0.01, "detections scoring below it are not decoded").range(0.0, 1.0);
    return t;
  }();
  return s;
}

class CenterNet : public trainyard::Network, public trainyard::Detector {
 public:
  CenterNet(const NetworkOptions& o, const trainyard::Context& c)
      : classes_(c.dataset.num_classes), max_detections_(o.max_detections), threshold_(o.score_threshold) {
    const auto& shape = c.dataset.sample_shape;
    if (shape.size() != 3)
      throw trainyard::ConfigError(
          "centernet needs image inputs",
          "expected a sample shape [channels, height, width], got " + std::to_string(shape.size()) + " dimensions", "");
    if (classes_ <= 0)
      throw trainyard::ConfigError("the dataset reports no classes",
                                   "expected a detection dataset (coco with target: boxes: num_classes > 0)", "");
    levels_.emplace(*this, unet::LevelOptions{o.depth, o.width, /*stop_level=*/2, /*batch_norm=*/true},
                    c);  // 2^2 = kStride
    const int64_t width = levels_->out_channels();
    auto head = [&](int64_t out, double bias) {
      torch::nn::Sequential h;
      h->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(width, o.head_width, 3).padding(1)));
      h->push_back(torch::nn::ReLU());
      torch::nn::Conv2d last(torch::nn::Conv2dOptions(o.head_width, out, 1));
      torch::nn::init::constant_(last->bias, bias);
      h->push_back(last);
      return h;
    };
    // The heatmaps start at sigmoid(-2.19) = 0.1 (the paper's prior): the
    // focal loss of an almost all-background map starts small and stable.
    heat_ = head(classes_, -2.19);
    size_ = head(2, 0);
    offset_ = head(2, 0);
    register_module("heat", heat_);
    register_module("size", size_);
    register_module("offset", offset_);
  }

  at::Tensor forward(const trainyard::Batch& batch) override {
    const at::Tensor x = levels_->forward(batch.input);
    return at::cat({heat_->forward(x), size_->forward(x), offset_->forward(x)}, 1);
  }

  trainyard::Fields decode(const at::Tensor& output, const trainyard::Batch& batch) const override {
    const int64_t b = output.size(0), k = classes_, rows = output.size(2), cols = output.size(3);
    const at::Tensor out = output.detach().to(at::kFloat);
    const at::Tensor heat = out.narrow(1, 0, k).sigmoid();
    // A peak is its 3x3 neighbourhood's maximum.
    const at::Tensor peaks = heat * heat.eq(at::max_pool2d(heat, {3, 3}, {1, 1}, {1, 1}));
    const int64_t n = std::min(max_detections_, k * rows * cols);
    const auto [scores, where] = peaks.reshape({b, -1}).topk(n, 1);
    const at::Tensor label = where.div(rows * cols, "floor");
    const at::Tensor cell = where.remainder(rows * cols);
    const at::Tensor row = cell.div(cols, "floor"), col = cell.remainder(cols);
    const auto at_cells = [&](int64_t channel) { return out.select(1, k + channel).reshape({b, -1}).gather(1, cell); };
    const at::Tensor cx = (col.to(at::kFloat) + at_cells(2)) * kStride;
    const at::Tensor cy = (row.to(at::kFloat) + at_cells(3)) * kStride;
    const at::Tensor half_w = at_cells(0).clamp_min(0) * kStride / 2, half_h = at_cells(1).clamp_min(0) * kStride / 2;
    const double width = static_cast<double>(batch.input.size(-1)), height = static_cast<double>(batch.input.size(-2));
    const at::Tensor boxes = at::stack({(cx - half_w).clamp(0, width), (cy - half_h).clamp(0, height),
                                        (cx + half_w).clamp(0, width), (cy + half_h).clamp(0, height)},
                                       2);
    // Highest first already (topk sorts); keep those above the threshold.
    const at::Tensor keep = scores.ge(threshold_);
    const at::Tensor counts = keep.sum(1).to(at::kCPU, at::kLong);
    trainyard::Fields f;
    namespace name = trainyard::field_name;
    f[name::detected_boxes] = {trainyard::FieldKind::ragged, boxes.index({keep}), counts, 0};
    f[name::detected_labels] = {trainyard::FieldKind::ragged, label.index({keep}), counts, 0};
    f[name::detected_scores] = {trainyard::FieldKind::ragged, scores.index({keep}), counts, 0};
    return f;
  }
  double score_threshold() const override { return threshold_; }

 private:
  int64_t classes_, max_detections_;
  double threshold_;
  std::optional<unet::Levels> levels_;  // registered first: the keys' order as before the levels were shared
  torch::nn::Sequential heat_, size_, offset_;
};

}  // namespace

trainyard::Schema network_schema() { return network_typed_schema().schema(); }

std::shared_ptr<trainyard::Network> make_network(const trainyard::Options& options, const trainyard::Context& context) {
  return std::make_shared<CenterNet>(network_typed_schema().bind(options), context);
}

}  // namespace centernet
