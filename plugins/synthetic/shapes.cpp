// synthetic_shapes: learnable segmentation data for tests and smoke runs.
// Each image is noise on a dark background with 1 to max_shapes rectangles,
// each of a class 1..num_classes-1 drawn at that class's brightness; its
// mask holds each pixel's class (0: background), and with void_border the
// one-pixel outline of each rectangle is 255 (void, as Pascal VOC marks
// boundaries), for ignore_index. Sample i depends only on (seed, i).
#include <algorithm>
#include <random>

#include <ATen/ATen.h>
#include <trainyard/error.h>

#include "synthetic.h"

namespace synthetic {
namespace {

struct ShapesOptions {
  int64_t size = 0;
  int64_t num_classes = 0;
  std::vector<int64_t> shape;
  int64_t max_shapes = 0;
  double noise = 0;
  bool void_border = false;
  int64_t seed = 0;
};

const trainyard::TypedSchema<ShapesOptions>& typed_schema() {
  static const trainyard::TypedSchema<ShapesOptions> s = [] {
    using O = ShapesOptions;
    trainyard::TypedSchema<O> t;
    t.add("size", &O::size, 256, "number of images").min(1);
    t.add("num_classes", &O::num_classes, 4, "classes in the masks, the background (0) included").range(2, 255);
    t.add("shape", &O::shape, {1, 32, 32}, "shape of one image [channels, height, width]").min(1);
    t.add("max_shapes", &O::max_shapes, 3, "rectangles per image: 1 to this many").range(1, 64);
    t.add("noise", &O::noise, 0.2, "standard deviation of the noise added to every pixel").min(0.0);
    t.add("void_border", &O::void_border, false, "mark each rectangle's outline 255 (void) in the mask");
    t.add("seed", &O::seed, 1, "seed of the images (use different seeds for train and test)").min(0);
    return t;
  }();
  return s;
}

class Shapes : public trainyard::Dataset {
 public:
  explicit Shapes(const ShapesOptions& o) : shape_(o.shape), classes_(o.num_classes) {
    if (shape_.size() != 3 || shape_[1] < 4 || shape_[2] < 4)
      throw trainyard::ConfigError("shape must be [channels, height, width] of at least 4x4",
                                   "expected e.g. [1, 32, 32]", "");
    const int64_t n = o.size, ch = shape_[0], h = shape_[1], w = shape_[2];
    images_ = at::empty({n, ch, h, w}, at::kFloat);
    masks_ = at::zeros({n, h, w}, at::kLong);
    float* image = images_.data_ptr<float>();
    int64_t* mask = masks_.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      std::mt19937_64 random(static_cast<uint64_t>(o.seed) * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(i));
      std::normal_distribution<float> noise(0.0f, static_cast<float>(o.noise));
      std::vector<float> level(static_cast<size_t>(h * w), 0.0f);
      int64_t* m = mask + i * h * w;
      const int64_t count = std::uniform_int_distribution<int64_t>(1, o.max_shapes)(random);
      for (int64_t k = 0; k < count; ++k) {
        const int64_t c = std::uniform_int_distribution<int64_t>(1, classes_ - 1)(random);
        const int64_t rh = std::uniform_int_distribution<int64_t>(std::max<int64_t>(2, h / 8), h / 2)(random);
        const int64_t rw = std::uniform_int_distribution<int64_t>(std::max<int64_t>(2, w / 8), w / 2)(random);
        const int64_t y0 = std::uniform_int_distribution<int64_t>(0, h - rh)(random);
        const int64_t x0 = std::uniform_int_distribution<int64_t>(0, w - rw)(random);
        for (int64_t y = y0; y < y0 + rh; ++y)
          for (int64_t x = x0; x < x0 + rw; ++x) {
            const bool edge = y == y0 || x == x0 || y == y0 + rh - 1 || x == x0 + rw - 1;
            level[static_cast<size_t>(y * w + x)] = static_cast<float>(c) / static_cast<float>(classes_ - 1);
            m[y * w + x] = o.void_border && edge ? 255 : c;
          }
      }
      for (int64_t ci = 0; ci < ch; ++ci)
        for (int64_t p = 0; p < h * w; ++p)
          image[(i * ch + ci) * h * w + p] = level[static_cast<size_t>(p)] + noise(random);
    }
  }
  int64_t size() const override { return images_.size(0); }
  trainyard::Example get(int64_t i) const override { return {images_[i], masks_[i]}; }
  trainyard::Batch get_batch(const std::vector<int64_t>& indices, const std::vector<uint64_t>&) const override {
    auto idx = at::tensor(indices, at::kLong);
    return {images_.index_select(0, idx), masks_.index_select(0, idx), indices};
  }
  trainyard::DatasetInfo info() const override { return {size(), classes_, shape_, {}}; }

 private:
  std::vector<int64_t> shape_;
  int64_t classes_ = 0;
  at::Tensor images_, masks_;
};

}  // namespace

trainyard::Schema shapes_schema() { return typed_schema().schema(); }

std::shared_ptr<trainyard::Dataset> make_shapes(const trainyard::Options& options) {
  return std::make_shared<Shapes>(typed_schema().bind(options));
}

}  // namespace synthetic
