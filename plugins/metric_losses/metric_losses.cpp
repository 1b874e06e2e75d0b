#include "metric_losses.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <trainyard/embeddings.h>
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

struct ArcFaceOptions {
  int64_t embedding_size = 0;
  double margin_degrees = 28.6;
  double scale = 64;
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

const trainyard::TypedSchema<ArcFaceOptions>& arcface_typed_schema() {
  static const auto s = [] {
    trainyard::TypedSchema<ArcFaceOptions> t;
    t.add("embedding_size", &ArcFaceOptions::embedding_size, 64,
          "size of the network's embeddings (its embedding_size): the length of each class centre")
        .min(1);
    t.add("margin_degrees", &ArcFaceOptions::margin_degrees, 28.6,
          "additive angular margin between an embedding and its class centre (28.6 degrees = 0.5 rad)")
        .range(0.0, 90.0);
    t.add("scale", &ArcFaceOptions::scale, 64.0, "the logits' scale (the radius of the hypersphere)").min(1e-3);
    return t;
  }();
  return s;
}

// Embeddings [N, D] and class labels [N], or the error saying what came.
at::Tensor checked_labels(const at::Tensor& output, const trainyard::Batch& batch, const std::string& loss) {
  if (output.dim() != 2)
    throw trainyard::ConfigError(
        std::string(loss) + ": the network's output has " + std::to_string(output.dim()) + " dimensions",
        "expected embeddings [batch, size]", "use a network that outputs one vector per sample");
  if (batch.target.dim() != 1 || at::isFloatingType(batch.target.scalar_type()))
    throw trainyard::ConfigError(std::string(loss) + ": the batch's targets are not class labels",
                                 "expected one integer class per sample", "use a dataset with class labels");
  return batch.target.to(at::kLong);
}

// A batch's embeddings compared pairwise, and which pairs share a class.
struct Comparison {
  bool similarity;      ///< cosine: larger is closer
  at::Tensor matrix;    ///< [N, N] distances or similarities
  at::Tensor same;      ///< [N, N] one class (the diagonal included)
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

// What the last compute() mined, reported as meter values (SDK 1.4's
// LossValues): how many triplets or pairs it kept, how many of them had a
// loss above zero, and that fraction. Tensors, read by the host only at the
// log interval; zeros before the first compute().
class MiningReport : public trainyard::LossValues {
 public:
  MiningReport(std::string unit) : unit_(std::move(unit)) { record(at::zeros({}, at::kLong), 0); }
  std::map<std::string, at::Tensor> last_values() const override {
    return {{"mined_" + unit_, mined_}, {"active_" + unit_, active_}, {"active_fraction", fraction_}};
  }

 protected:
  void record(const at::Tensor& mined, int64_t active) {
    mined_ = mined.to(at::kDouble);
    active_ = at::scalar_tensor(static_cast<double>(active), at::kDouble);
    fraction_ = active_.to(mined_.device()) / mined_.clamp_min(1);
  }

 private:
  std::string unit_;  ///< "triplets", "pairs"
  at::Tensor mined_, active_, fraction_;
};

class TripletMargin : public trainyard::Loss, public trainyard::EmbeddingLoss, public MiningReport {
 public:
  explicit TripletMargin(TripletOptions o) : MiningReport("triplets"), o_(std::move(o)) {}

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
      const int64_t nonzero = losses.gt(0).sum().item<int64_t>();
      record(keep.sum(), nonzero);
      return mean_of_nonzero(losses.sum(), nonzero, output);
    }
    // Mining sees every triplet of a slice without grad; the loss (and its
    // backward) only the mined ones, gathered from the distance matrix.
    at::Tensor sum = output.sum() * 0.0;
    int64_t mined = 0, nonzero = 0;
    for (int64_t a0 = 0; a0 < n; a0 += kAnchorsPerSlice) {
      const int64_t len = std::min(kAnchorsPerSlice, n - a0);
      at::Tensor triplets;  // [T, 3]: anchor (within the slice), positive, negative
      {
        at::NoGradGuard no_grad;
        at::Tensor valid = positive.narrow(0, a0, len).unsqueeze(2) & negative.narrow(0, a0, len).unsqueeze(1);
        if (o_.mining == "semihard") {
          const at::Tensor rows = m.narrow(0, a0, len).detach();
          const at::Tensor r = room(rows.unsqueeze(2), rows.unsqueeze(1));  // [a, p, n]
          valid = valid & r.gt(0) & r.le(o_.margin);
        }
        triplets = valid.nonzero();
      }
      if (triplets.size(0) == 0) continue;
      const at::Tensor anchor = triplets.select(1, 0) + a0;
      const at::Tensor losses = at::relu(
          o_.margin - room(m.index({anchor, triplets.select(1, 1)}), m.index({anchor, triplets.select(1, 2)})));
      sum = sum + losses.sum();
      mined += triplets.size(0);
      nonzero += losses.gt(0).sum().item<int64_t>();
    }
    record(at::scalar_tensor(mined, at::kLong), nonzero);
    return mean_of_nonzero(sum, nonzero, output);
  }

 private:
  TripletOptions o_;
};

class Contrastive : public trainyard::Loss, public trainyard::EmbeddingLoss, public MiningReport {
 public:
  explicit Contrastive(ContrastiveOptions o) : MiningReport("pairs"), o_(std::move(o)) {}

  at::Tensor compute(const at::Tensor& output, const trainyard::Batch& batch) override {
    const Comparison c = compare(output, batch, "contrastive", o_.distance, o_.normalize);
    const at::Tensor& m = c.matrix;
    // Positive pairs should be near (similar), negative pairs far (dissimilar).
    const at::Tensor pos =
        (c.similarity ? at::relu(o_.pos_margin - m) : at::relu(m - o_.pos_margin)).masked_select(c.positive);
    const at::Tensor neg =
        (c.similarity ? at::relu(m - o_.neg_margin) : at::relu(o_.neg_margin - m)).masked_select(~c.same);
    const int64_t pos_nonzero = pos.gt(0).sum().item<int64_t>(), neg_nonzero = neg.gt(0).sum().item<int64_t>();
    record(at::scalar_tensor(pos.numel() + neg.numel(), at::kLong), pos_nonzero + neg_nonzero);
    return mean_of_nonzero(pos.sum(), pos_nonzero, output) + mean_of_nonzero(neg.sum(), neg_nonzero, output);
  }

 private:
  ContrastiveOptions o_;
};

// One learnable centre per class, registered by the host under the network
// as "loss" (SDK 1.4 LossParameters): "loss.centres", [classes, size].
class Centres : public torch::nn::Module {
 public:
  Centres(int64_t classes, int64_t size) {
    // Standard normal, as pytorch-metric-learning initializes its W.
    weight = register_parameter("centres", at::randn({classes, size}, at::kFloat));
  }
  at::Tensor weight;
};

// Additive angular margin (Deng et al. 2019, ArcFace): the cosine of each
// embedding with every class centre, the target class's angle widened by the
// margin, scaled, then cross-entropy (the mean over the batch).
class ArcFace : public trainyard::Loss,
                public trainyard::EmbeddingLoss,
                public trainyard::LossParameters,
                public trainyard::LossValues {
 public:
  ArcFace(ArcFaceOptions o, int64_t classes)
      : o_(o),
        margin_(o.margin_degrees * M_PI / 180.0),
        centres_(std::make_shared<Centres>(classes, o.embedding_size)) {
    angle_ = at::zeros({}, at::kDouble);
  }
  std::shared_ptr<torch::nn::Module> module() override { return centres_; }
  std::map<std::string, at::Tensor> last_values() const override { return {{"target_angle_degrees", angle_}}; }

  at::Tensor compute(const at::Tensor& output, const trainyard::Batch& batch) override {
    const at::Tensor labels = checked_labels(output, batch, "arcface");
    const at::Tensor& w = centres_->weight;
    if (output.size(1) != w.size(1))
      throw trainyard::ConfigError("arcface: embeddings of size " + std::to_string(output.size(1)),
                                   "expected " + std::to_string(w.size(1)) + " (loss.embedding_size)",
                                   "set loss.embedding_size to the network's embedding_size");
    const at::Tensor cosine = trainyard::l2_normalize_rows(output).mm(trainyard::l2_normalize_rows(w).t());  // [N, C]
    const at::Tensor target = cosine.gather(1, labels.unsqueeze(1)).squeeze(1);
    const at::Tensor angle = at::acos(target.clamp(-1, 1));
    // cos(theta + m) while theta + m stays below pi, else a linear stand-in that keeps decreasing.
    const at::Tensor widened =
        at::where(angle <= M_PI - margin_, at::cos(angle + margin_), at::cos(angle) - margin_ * std::sin(margin_));
    const at::Tensor logits = cosine.scatter(1, labels.unsqueeze(1), widened.unsqueeze(1)) * o_.scale;
    angle_ = angle.detach().mean().mul(180.0 / M_PI).to(at::kDouble);
    return at::cross_entropy_loss(logits, labels);
  }

 private:
  ArcFaceOptions o_;
  double margin_;
  std::shared_ptr<Centres> centres_;
  at::Tensor angle_;
};

}  // namespace

at::Tensor pairwise(const at::Tensor& x, const std::string& distance, bool normalize) {
  if (distance == "cosine") {
    const at::Tensor e = trainyard::l2_normalize_rows(x);
    return e.mm(e.t());
  }
  const at::Tensor e = normalize ? trainyard::l2_normalize_rows(x) : x;
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

trainyard::Schema arcface_schema() { return arcface_typed_schema().schema(); }
std::shared_ptr<trainyard::Loss> make_arcface(const trainyard::Options& options, const trainyard::Context& context) {
  if (context.dataset.num_classes <= 0)
    throw trainyard::ConfigError("arcface: the training dataset reports no classes",
                                 "expected a dataset with class labels (one centre per class)", "");
  return std::make_shared<ArcFace>(arcface_typed_schema().bind(options), context.dataset.num_classes);
}

}  // namespace metric_losses
