#include "metric_losses.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <trainyard/error.h>

namespace metric_losses {
namespace {

// Anchors per slice of the [anchors, N, N] triplet tensors: memory stays at
// 64 * N^2 values whatever the batch (64 MB at N = 512).
constexpr int64_t kAnchorsPerSlice = 64;

struct TripletOptions {
  double margin = 0.05;
  std::string mining = "all";
  std::string distance = "euclidean";
  bool normalize = true;
};

struct ContrastiveOptions {
  double pos_margin = 0;
  double neg_margin = 1;
  std::string distance = "euclidean";
  bool normalize = true;
};

template <class O>
void add_distance_options(trainyard::TypedSchema<O>& t) {
  t.add("distance", &O::distance, "euclidean",
        "euclidean: L2 distance (smaller is closer); cosine: cosine similarity of the normalized embeddings "
        "(larger is closer)")
      .one_of({"euclidean", "cosine"});
  t.add("normalize", &O::normalize, true, "L2-normalize the embeddings before euclidean distances");
}

const trainyard::TypedSchema<TripletOptions>& triplet_schema() {
  static const auto s = [] {
    trainyard::TypedSchema<TripletOptions> t;
    t.add("margin", &TripletOptions::margin, 0.05,
          "how much closer the positive must be than the negative; also the semihard band")
        .min(0.0);
    t.add("mining", &TripletOptions::mining, "all",
          "all: every triplet of the batch (loss averaged over the triplets that violate the margin); hard: "
          "per anchor its farthest positive and nearest negative; semihard: the triplets whose negative is "
          "farther than the positive by at most margin")
        .one_of({"all", "hard", "semihard"});
    add_distance_options(t);
    return t;
  }();
  return s;
}

const trainyard::TypedSchema<ContrastiveOptions>& contrastive_typed_schema() {
  static const auto s = [] {
    trainyard::TypedSchema<ContrastiveOptions> t;
    t.add("pos_margin", &ContrastiveOptions::pos_margin, 0.0,
          "positive pairs farther than this (euclidean), or less similar (cosine), are penalized");
    t.add("neg_margin", &ContrastiveOptions::neg_margin, 1.0,
          "negative pairs nearer than this (euclidean), or more similar (cosine), are penalized");
    add_distance_options(t);
    return t;
  }();
  return s;
}

// Embeddings [N, D] and class labels [N], or the error saying what came.
at::Tensor checked_labels(const at::Tensor& output, const trainyard::Batch& batch, const std::string& loss) {
  if (output.dim() != 2)
    throw trainyard::ConfigError(std::string(loss) + ": the network's output has " + std::to_string(output.dim()) +
                                     " dimensions",
                                 "expected embeddings [batch, size]", "use a network that outputs one vector per sample");
  if (batch.target.dim() != 1 || at::isFloatingType(batch.target.scalar_type()))
    throw trainyard::ConfigError(std::string(loss) + ": the batch's targets are not class labels",
                                 "expected one integer class per sample", "use a dataset with class labels");
  return batch.target.to(at::kLong);
}

// A batch's embeddings compared pairwise, and which pairs share a class.
struct Comparison {
  bool similarity;    ///< cosine: larger is closer
  at::Tensor matrix;  ///< [N, N] distances or similarities
  at::Tensor same;    ///< [N, N] one class (the diagonal included)
  at::Tensor positive;  ///< same, without the diagonal
};

Comparison compare(const at::Tensor& output, const trainyard::Batch& batch, const std::string& loss,
                   const std::string& distance, bool normalize) {
  const at::Tensor labels = checked_labels(output, batch, loss);
  Comparison c;
  c.similarity = distance == "cosine";
  c.matrix = pairwise(output, distance, normalize);
  c.same = labels.unsqueeze(1).eq(labels.unsqueeze(0));
  c.positive = c.same & ~at::eye(c.matrix.size(0), at::TensorOptions().dtype(at::kBool).device(c.matrix.device()));
  return c;
}

// Mean of the losses above zero (pytorch-metric-learning's AvgNonZeroReducer);
// zero, still joined to the graph, when none is.
at::Tensor mean_of_nonzero(const at::Tensor& sum, int64_t nonzero, const at::Tensor& output) {
  return nonzero > 0 ? sum / static_cast<double>(nonzero) : output.sum() * 0.0;
}

class TripletMargin : public trainyard::Loss, public trainyard::EmbeddingLoss {
 public:
  explicit TripletMargin(TripletOptions o) : o_(std::move(o)) {}

  at::Tensor compute(const at::Tensor& output, const trainyard::Batch& batch) override {
    const Comparison c = compare(output, batch, "triplet_margin", o_.distance, o_.normalize);
    const bool similarity = c.similarity;
    const at::Tensor& m = c.matrix;
    const at::Tensor& positive = c.positive;
    const at::Tensor negative = ~c.same;
    const int64_t n = m.size(0);
    // How far each triplet is from violating the margin: (a, n) farther than (a, p) is positive.
    auto room = [&](const at::Tensor& ap, const at::Tensor& an) { return similarity ? ap - an : an - ap; };
    if (o_.mining == "hard") {
      const double far = similarity ? -1e9 : 1e9;
      // Farthest positive and nearest negative of each anchor that has both.
      const at::Tensor ap = similarity ? at::where(positive, m, 1e9).amin(1) : at::where(positive, m, -1e9).amax(1);
      const at::Tensor an = similarity ? at::where(negative, m, far).amax(1) : at::where(negative, m, far).amin(1);
      const at::Tensor keep = positive.any(1) & negative.any(1);
      const at::Tensor losses = at::relu(o_.margin - room(ap, an)).masked_select(keep);
      return mean_of_nonzero(losses.sum(), losses.gt(0).sum().item<int64_t>(), output);
    }
    at::Tensor sum = output.sum() * 0.0;
    int64_t nonzero = 0;
    for (int64_t a0 = 0; a0 < n; a0 += kAnchorsPerSlice) {
      const int64_t len = std::min(kAnchorsPerSlice, n - a0);
      const at::Tensor rows = m.narrow(0, a0, len);
      const at::Tensor r = room(rows.unsqueeze(2), rows.unsqueeze(1));  // [a, p, n]
      at::Tensor valid = positive.narrow(0, a0, len).unsqueeze(2) & negative.narrow(0, a0, len).unsqueeze(1);
      if (o_.mining == "semihard") valid = valid & r.gt(0) & r.le(o_.margin);
      const at::Tensor losses = at::relu(o_.margin - r).masked_select(valid);
      sum = sum + losses.sum();
      nonzero += losses.gt(0).sum().item<int64_t>();
    }
    return mean_of_nonzero(sum, nonzero, output);
  }

 private:
  TripletOptions o_;
};

class Contrastive : public trainyard::Loss, public trainyard::EmbeddingLoss {
 public:
  explicit Contrastive(ContrastiveOptions o) : o_(std::move(o)) {}

  at::Tensor compute(const at::Tensor& output, const trainyard::Batch& batch) override {
    const Comparison c = compare(output, batch, "contrastive", o_.distance, o_.normalize);
    const at::Tensor& m = c.matrix;
    // Positive pairs should be near (similar), negative pairs far (dissimilar).
    const at::Tensor pos = (c.similarity ? at::relu(o_.pos_margin - m) : at::relu(m - o_.pos_margin)).masked_select(c.positive);
    const at::Tensor neg = (c.similarity ? at::relu(m - o_.neg_margin) : at::relu(o_.neg_margin - m)).masked_select(~c.same);
    return mean_of_nonzero(pos.sum(), pos.gt(0).sum().item<int64_t>(), output) +
           mean_of_nonzero(neg.sum(), neg.gt(0).sum().item<int64_t>(), output);
  }

 private:
  ContrastiveOptions o_;
};

at::Tensor l2_normalized(const at::Tensor& x) { return x / x.norm(2, 1, /*keepdim=*/true).clamp_min(1e-12); }

}  // namespace

at::Tensor pairwise(const at::Tensor& x, const std::string& distance, bool normalize) {
  if (distance == "cosine") {
    const at::Tensor e = l2_normalized(x);
    return e.mm(e.t());
  }
  const at::Tensor e = normalize ? l2_normalized(x) : x;
  return at::cdist(e, e);
}

trainyard::Schema triplet_margin_schema() { return triplet_schema().schema(); }
std::shared_ptr<trainyard::Loss> make_triplet_margin(const trainyard::Options& options) {
  return std::make_shared<TripletMargin>(triplet_schema().bind(options));
}

trainyard::Schema contrastive_schema() { return contrastive_typed_schema().schema(); }
std::shared_ptr<trainyard::Loss> make_contrastive(const trainyard::Options& options) {
  return std::make_shared<Contrastive>(contrastive_typed_schema().bind(options));
}

}  // namespace metric_losses
