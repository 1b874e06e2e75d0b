#include "retrieval.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <trainyard/embeddings.h>
#include <trainyard/error.h>

namespace retrieval {
namespace {

struct RetrievalOptions {
  std::vector<int64_t> k;
  std::string distance;
  bool normalize = true;
  int64_t chunk_mb = 64;
};

const trainyard::TypedSchema<RetrievalOptions>& typed_schema() {
  static const trainyard::TypedSchema<RetrievalOptions> s = [] {
    using O = RetrievalOptions;
    trainyard::TypedSchema<O> t;
    t.add("k", &O::k, {1, 5},
          "report recall_at_K for each k: the fraction of queries with a sample of their class "
          "among their k nearest")
        .min(1);
    t.add("distance", &O::distance, "euclidean",
          "euclidean: L2 distance (smaller is nearer); cosine: cosine similarity (larger is nearer)")
        .one_of({"euclidean", "cosine"});
    t.add("normalize", &O::normalize, true, "L2-normalize the embeddings before euclidean distances");
    t.add("chunk_mb", &O::chunk_mb, 64,
          "memory for one chunk of queries: their distances to every sample, neighbour lists and ranks "
          "(about 16 bytes per query and sample); the test pass's embeddings themselves are held whole")
        .range(1, 1 << 20);
    return t;
  }();
  return s;
}

// One row per sample: the label, then the embedding, in the output's dtype
// (labels are exact there: float32 up to 2^24 classes).
class RetrievalMeter : public trainyard::Meter, public trainyard::SampleMeter {
 public:
  explicit RetrievalMeter(Settings s) : s_(std::move(s)) {}

  void reset() override { parts_.clear(); }
  void update(const trainyard::MeterInput& in) override {
    const at::Tensor& out = in.output;
    const at::Tensor& target = in.batch.target;
    if (out.dim() != 2)
      throw trainyard::ConfigError("retrieval: the network's output is " + std::to_string(out.dim()) + "-d",
                                   "expected embeddings [batch, size]",
                                   "use a network with an embedding head (embedding_size: N)");
    if (target.dim() != 1 || at::isFloatingType(target.scalar_type()))
      throw trainyard::ConfigError("retrieval: the batch's targets are not class labels",
                                   "expected one integer class per sample", "use a dataset with class labels");
    // Kept on the output's device as a list: no device sync per step.
    const auto dtype = out.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    parts_.push_back(at::cat({target.to(out.device(), dtype).unsqueeze(1), out.detach().to(dtype)}, 1));
  }
  std::vector<double> accumulators() const override { return {}; }
  void set_accumulators(const std::vector<double>&) override {}
  std::map<std::string, double> values() const override {
    const at::Tensor all = rows();
    if (!all.defined() || all.size(0) < 2) return {};
    return metrics(all.narrow(1, 1, all.size(1) - 1), all.select(1, 0).to(at::kLong), s_);
  }
  at::Tensor rows() const override {
    if (parts_.empty()) return at::Tensor();
    return parts_.size() == 1 ? parts_[0] : at::cat(parts_);
  }
  void set_rows(const at::Tensor& rows) override {
    parts_.clear();
    if (rows.defined()) parts_.push_back(rows);
  }

 private:
  Settings s_;
  std::vector<at::Tensor> parts_;
};

}  // namespace

std::map<std::string, double> metrics(const at::Tensor& embeddings, const at::Tensor& labels, const Settings& s) {
  const int64_t n = embeddings.size(0);
  const bool similarity = s.distance == "cosine";
  const at::Tensor e = similarity || s.normalize ? trainyard::l2_normalize_rows(embeddings) : embeddings;
  const at::Tensor y = labels.to(e.device(), at::kLong);
  // R per query: the other samples of its class.
  const at::Tensor sorted_labels = std::get<0>(at::sort(y));
  const at::Tensor class_sizes = at::searchsorted(sorted_labels, y, /*out_int32=*/false, /*right=*/true) -
                                 at::searchsorted(sorted_labels, y, /*out_int32=*/false, /*right=*/false);
  const at::Tensor r_all = class_sizes - 1;
  const int64_t max_r = r_all.max().item<int64_t>();
  const int64_t max_k = *std::max_element(s.k.begin(), s.k.end());
  const int64_t depth = std::min(std::max(max_k, max_r), n - 1);  // neighbours looked at per query
  if (depth < 1) return {};

  const int64_t chunk = std::max<int64_t>(1, std::min(n, s.chunk_elements / n));
  const auto opts = at::TensorOptions().dtype(at::kDouble).device(e.device());
  at::Tensor found = at::zeros({static_cast<int64_t>(s.k.size())}, opts);  // queries with a hit within k
  at::Tensor precision1 = at::zeros({}, opts), r_precision = at::zeros({}, opts), map_r = at::zeros({}, opts);
  at::Tensor answerable = at::zeros({}, opts);
  const at::Tensor ranks = at::arange(1, depth + 1, opts);  // 1..depth
  for (int64_t q0 = 0; q0 < n; q0 += chunk) {
    const int64_t len = std::min(chunk, n - q0);
    const at::Tensor q = e.narrow(0, q0, len);
    at::Tensor d = similarity ? q.mm(e.t()) : at::cdist(q, e);
    // A query never finds itself (leave-one-out).
    const at::Tensor self = at::arange(q0, q0 + len, at::TensorOptions().dtype(at::kLong).device(e.device()));
    d.scatter_(1, self.unsqueeze(1), similarity ? -INFINITY : INFINITY);
    const at::Tensor nearest = std::get<1>(d.topk(depth, /*dim=*/1, /*largest=*/similarity, /*sorted=*/true));
    const at::Tensor yq = y.narrow(0, q0, len);
    const at::Tensor r = r_all.narrow(0, q0, len);
    const at::Tensor keep = r.gt(0);  // a query alone in its class cannot be answered
    const at::Tensor hit =
        y.index_select(0, nearest.flatten()).view({len, depth}).eq(yq.unsqueeze(1)) & keep.unsqueeze(1);
    for (size_t i = 0; i < s.k.size(); ++i)
      found[static_cast<int64_t>(i)] += hit.narrow(1, 0, std::min(s.k[i], depth)).any(1).sum();
    precision1 += hit.select(1, 0).sum();
    // Within the first R neighbours: R-precision, and the precision at each hit (mAP@R).
    const at::Tensor within_r = ranks.unsqueeze(0).le(r.unsqueeze(1));
    const at::Tensor hit_r = (hit & within_r).to(at::kDouble);
    const at::Tensor r_safe = r.clamp_min(1).to(at::kDouble);
    r_precision += (hit_r.sum(1) / r_safe).sum();
    map_r += ((hit_r.cumsum(1) * hit_r / ranks).sum(1) / r_safe).sum();
    answerable += keep.sum();
  }
  const double queries = answerable.item<double>();
  if (queries == 0) return {};
  std::map<std::string, double> v;
  const at::Tensor found_cpu = found.cpu();
  for (size_t i = 0; i < s.k.size(); ++i)
    v["recall_at_" + std::to_string(s.k[i])] = found_cpu[static_cast<int64_t>(i)].item<double>() / queries;
  v["precision_at_1"] = precision1.item<double>() / queries;
  v["r_precision"] = r_precision.item<double>() / queries;
  v["map_at_r"] = map_r.item<double>() / queries;
  return v;
}

trainyard::Schema schema() { return typed_schema().schema(); }

std::shared_ptr<trainyard::Meter> make(const trainyard::Options& options, const trainyard::Context&) {
  const RetrievalOptions o = typed_schema().bind(options);
  if (o.k.empty()) throw trainyard::ConfigError("k is empty", "expected at least one k, e.g. [1, 5]", "");
  Settings s;
  s.k = o.k;
  s.distance = o.distance;
  s.normalize = o.normalize;
  s.chunk_elements = o.chunk_mb * (int64_t{1} << 20) / 16;
  return std::make_shared<RetrievalMeter>(s);
}

}  // namespace retrieval
