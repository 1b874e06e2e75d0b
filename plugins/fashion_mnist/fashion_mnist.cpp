// The Fashion-MNIST idx files, held in memory as a float tensor.
#include "fashion_mnist.h"

#include <filesystem>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <trainyard/error.h>

#include "idx.h"

namespace fashion_mnist {
namespace {

const std::vector<std::string> kClassNames = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                              "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

std::string find_file(const std::string& dir, const std::string& stem) {
  for (const char* suffix : {".gz", ""}) {
    auto p = std::filesystem::path(dir) / (stem + suffix);
    if (std::filesystem::exists(p)) return p.string();
  }
  return (std::filesystem::path(dir) / (stem + ".gz")).string();
}

// The options, bound to the schema below (which holds their defaults).
struct FashionMnistOptions {
  std::string directory;  // absolute: the host resolves it against the experiment file's folder
  std::string split;
  bool normalize = false;
  double mean = 0, std = 0;
  int64_t limit = 0;
  std::vector<int64_t> classes;
};

const trainyard::TypedSchema<FashionMnistOptions>& typed_schema() {
  static const trainyard::TypedSchema<FashionMnistOptions> s = [] {
    using O = FashionMnistOptions;
    trainyard::TypedSchema<O> t;
    t.add_path("directory", &O::directory, "/usr/share/datasets/fashion-mnist",
               "folder with the idx files (.gz or uncompressed); relative to the experiment file");
    t.add("split", &O::split, "train", "which files to read").one_of({"train", "test"});
    t.add("normalize", &O::normalize, true, "subtract mean and divide by std after scaling pixels to [0, 1]");
    t.add("mean", &O::mean, 0.2860, "pixel mean used by normalize (Fashion-MNIST train set)");
    t.add("std", &O::std, 0.3530, "pixel standard deviation used by normalize").min(1e-6);
    t.add("limit", &O::limit, 0, "use only the first N samples; 0 uses all").min(0);
    t.add("classes", &O::classes, std::vector<int64_t>{},
          "keep only the samples of these classes (labels keep their numbers), e.g. [0, 1, 2, 3, 4, 5] to train "
          "an embedding and [6, 7, 8, 9] to test it on classes it never saw; empty keeps all")
        .range(0, 9);
    return t;
  }();
  return s;
}

class FashionMnist : public trainyard::Dataset, public trainyard::AllLabels {
 public:
  explicit FashionMnist(const FashionMnistOptions& o) {
    const std::string& dir = o.directory;
    if (!std::filesystem::is_directory(dir))
      throw trainyard::ConfigError("directory '" + dir + "' does not exist",
                                   "expected a folder holding the Fashion-MNIST idx files",
                                   "install the dataset-fashion-mnist package or set the directory option");
    const std::string prefix = o.split == "train" ? "train" : "t10k";
    IdxArray images = read_idx(find_file(dir, prefix + "-images-idx3-ubyte"), 3);
    IdxArray labels = read_idx(find_file(dir, prefix + "-labels-idx1-ubyte"), 1);
    if (images.dims[0] != labels.dims[0])
      throw trainyard::DataError(dir + ": " + prefix + " images and labels disagree",
                                 "expected as many labels as images, got " + std::to_string(labels.dims[0]) +
                                     " labels for " + std::to_string(images.dims[0]) + " images",
                                 "reinstall the dataset");
    int64_t n = images.dims[0];
    if (o.limit > 0) n = std::min(n, o.limit);
    const int64_t h = images.dims[1], w = images.dims[2];
    // Pixels to floats in one pass through a table of the 256 byte values
    // (scaled to [0, 1], then normalized, by the same ATen operations as the
    // batches would see): start-up time, not per-step time (docs/performance.md).
    at::Tensor table = at::arange(256, at::kFloat).div_(255.0);
    if (o.normalize) {
      table.sub_(o.mean).div_(o.std);
      mean_ = {o.mean};
      std_ = {o.std};
    }
    images_ = at::empty({n, 1, h, w}, at::kFloat);
    const uint8_t* from = images.data.const_data_ptr<uint8_t>();
    const float* value = table.const_data_ptr<float>();
    float* to = images_.mutable_data_ptr<float>();
    at::parallel_for(0, n * h * w, 1 << 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) to[i] = value[from[i]];
    });
    labels_ = labels.data.narrow(0, 0, n).to(at::kLong);
    int64_t max_label = labels_.max().item<int64_t>();
    if (max_label >= 10)
      throw trainyard::DataError(dir + ": label " + std::to_string(max_label) + " out of range",
                                 "expected classes 0..9", "reinstall the dataset");
    if (!o.classes.empty()) {
      // The samples of the listed classes, in file order (after limit).
      const at::Tensor wanted = at::tensor(o.classes, at::kLong);
      const at::Tensor keep = at::isin(labels_, wanted).nonzero().flatten();
      images_ = images_.index_select(0, keep);
      labels_ = labels_.index_select(0, keep);
    }
    shape_ = {1, h, w};
  }

  int64_t size() const override { return images_.size(0); }
  at::Tensor all_labels() const override { return labels_; }
  trainyard::Example get(int64_t i) const override { return {images_[i], labels_[i]}; }
  // In memory, no augmentation: one gather, the seeds unused.
  trainyard::Batch get_batch(const std::vector<int64_t>& indices, const std::vector<uint64_t>&) const override {
    auto idx = at::tensor(indices, at::kLong);
    return {images_.index_select(0, idx), labels_.index_select(0, idx), indices};
  }
  trainyard::DatasetInfo info() const override { return {size(), 10, shape_, kClassNames}; }
  // An image file becomes a sample as the idx pixels do: one gray channel,
  // the idx size, [0, 1], then this dataset's mean and std.
  std::optional<std::map<std::string, trainyard::Value>> image_preprocessing() const override {
    return std::map<std::string, trainyard::Value>{{"color", std::string("gray")},
                                                   {"load_size", std::vector<int64_t>{shape_[1], shape_[2]}},
                                                   {"mean", mean_},
                                                   {"std", std_}};
  }

 private:
  at::Tensor images_, labels_;
  std::vector<int64_t> shape_;
  std::vector<double> mean_, std_;  ///< empty without normalize
};

}  // namespace

trainyard::Schema schema() { return typed_schema().schema(); }

std::shared_ptr<trainyard::Dataset> make(const trainyard::Options& options) {
  return std::make_shared<FashionMnist>(typed_schema().bind(options));
}

}  // namespace fashion_mnist
