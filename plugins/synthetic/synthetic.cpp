// Random but learnable data: each class has a fixed random prototype, and a
// sample is its class's prototype plus Gaussian noise. Train and test splits
// share prototypes (prototype_seed) and differ in noise (seed).
#include "synthetic.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace synthetic {
namespace {

// The options, bound to the schema below (which holds their defaults).
struct SyntheticOptions {
  int64_t size = 0;
  int64_t num_classes = 0;
  std::vector<int64_t> shape;
  double noise = 0;
  int64_t seed = 0;
  int64_t prototype_seed = 0;
};

const trainyard::TypedSchema<SyntheticOptions>& typed_schema() {
  static const trainyard::TypedSchema<SyntheticOptions> s = [] {
    using O = SyntheticOptions;
    trainyard::TypedSchema<O> t;
    t.add("size", &O::size, 1024, "number of samples").min(1);
    t.add("num_classes", &O::num_classes, 10, "number of classes; sample i has class i % num_classes").min(1);
    t.add("shape", &O::shape, {1, 8, 8}, "shape of one input").min(1);
    t.add("noise", &O::noise, 0.5, "standard deviation of the noise added to the class prototype").min(0.0);
    t.add("seed", &O::seed, 1, "seed of the noise (use different seeds for train and test)").min(0);
    t.add("prototype_seed", &O::prototype_seed, 1234, "seed of the class prototypes (keep equal for train and test)")
        .min(0);
    return t;
  }();
  return s;
}

class Synthetic : public trainyard::Dataset, public trainyard::AllLabels {
 public:
  explicit Synthetic(const SyntheticOptions& o) : shape_(o.shape) {
    const int64_t n = o.size, classes = o.num_classes;
    classes_ = classes;
    std::vector<int64_t> full = {n};
    full.insert(full.end(), shape_.begin(), shape_.end());
    std::vector<int64_t> protos = {classes};
    protos.insert(protos.end(), shape_.begin(), shape_.end());
    auto proto_gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(o.prototype_seed));
    auto noise_gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(o.seed));
    at::Tensor prototypes = at::randn(protos, proto_gen, at::kFloat);
    labels_ = at::arange(n, at::kLong).remainder(classes);
    inputs_ = prototypes.index_select(0, labels_) + o.noise * at::randn(full, noise_gen, at::kFloat);
  }
  int64_t size() const override { return inputs_.size(0); }
  trainyard::Example get(int64_t i) const override { return {inputs_[i], labels_[i]}; }
  at::Tensor all_labels() const override { return labels_; }
  // In memory, no augmentation: one gather, the seeds unused.
  trainyard::Batch get_batch(const std::vector<int64_t>& indices, const std::vector<uint64_t>&) const override {
    auto idx = at::tensor(indices, at::kLong);
    return {inputs_.index_select(0, idx), labels_.index_select(0, idx), indices};
  }
  trainyard::DatasetInfo info() const override { return {size(), classes_, shape_, {}}; }

 private:
  std::vector<int64_t> shape_;
  int64_t classes_ = 0;
  at::Tensor inputs_, labels_;
};

}  // namespace

trainyard::Schema schema() { return typed_schema().schema(); }

std::shared_ptr<trainyard::Dataset> make(const trainyard::Options& options) {
  return std::make_shared<Synthetic>(typed_schema().bind(options));
}

}  // namespace synthetic
