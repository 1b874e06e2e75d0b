// coco_map: COCO's box mAP, the 12 statistics of pycocotools' COCOeval
// (iouType "bbox"), over a whole test pass. The rule is pycocotools 2.0.11's,
// reimplemented from its documented behaviour: per image and category, the
// detections (highest score first, at most maxDets) are matched greedily to
// the ground truth at each IoU threshold 0.50:0.05:0.95, a crowd box matching
// any number of detections by intersection over the detection's area; ground
// truth that is crowd or outside the area range is ignored, as is a detection
// matched to it or unmatched outside the range; precision is made monotone
// and read at 101 recall points; categories without ground truth are left out
// of the means. Areas are in the original image's pixels.
//
// Reads SDK 1.5 fields (trainyard/fields.h): the ground truth `boxes`
// (mapped back to the original image through `input_from_original`),
// `box_labels`, `box_crowd` and `box_area` where present, and the detections
// the host decoded (`detected_boxes` in original pixels, `detected_labels`,
// `detected_scores`). Its state is one row per box (SampleMeter), gathered
// from every rank before the statistics are computed: 2 ranks give what one
// process gives.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <trainyard/error.h>
#include <trainyard/fields.h>

#include "meters.h"

namespace meters {
namespace {

struct CocoMapOptions {
  std::vector<int64_t> max_detections{1, 10, 100};
};

const trainyard::TypedSchema<CocoMapOptions>& coco_map_typed_schema() {
  static const trainyard::TypedSchema<CocoMapOptions> s = [] {
    trainyard::TypedSchema<CocoMapOptions> t;
    t.add("max_detections", &CocoMapOptions::max_detections, std::vector<int64_t>{1, 10, 100},
          "COCOeval's maxDets: detections per image and category counted for AR@1, AR@10 and AP and AR@100")
        .min(1);
    return t;
  }();
  return s;
}

// A row of the meter's state: ground truth (kind 0) or a detection (kind 1).
enum Column { kKind, kImage, kLabel, kX1, kY1, kX2, kY2, kScore, kCrowd, kArea, kWidth };

struct Box {
  double x1, y1, x2, y2, score, area;
  bool crowd;
};

// pycocotools' bbox IoU: intersection over union, or over the detection's
// area when the ground truth is a crowd.
double iou(const Box& d, const Box& g) {
  const double w = std::min(d.x2, g.x2) - std::max(d.x1, g.x1), h = std::min(d.y2, g.y2) - std::max(d.y1, g.y1);
  if (w <= 0 || h <= 0) return 0;
  const double inter = w * h, ad = (d.x2 - d.x1) * (d.y2 - d.y1), ag = (g.x2 - g.x1) * (g.y2 - g.y1);
  const double u = g.crowd ? ad : ad + ag - inter;
  return u > 0 ? inter / u : 0;
}

// numpy.linspace(start, stop, num): start + i * step, the last exactly stop.
std::vector<double> linspace(double start, double stop, int num) {
  std::vector<double> v(static_cast<size_t>(num));
  const double step = (stop - start) / (num - 1);
  for (int i = 0; i < num; ++i) v[static_cast<size_t>(i)] = i * step + start;
  v.back() = stop;
  return v;
}

// One image and category at one area range, as pycocotools' evaluateImg leaves it.
struct ImageEval {
  std::vector<double> scores;              ///< detections, highest first (stable), at most the largest maxDets
  std::vector<std::vector<char>> matched;  ///< [threshold][detection]
  std::vector<std::vector<char>> ignored;  ///< [threshold][detection]
  int64_t counted_truth = 0;               ///< ground truth not ignored
};

class CocoMap : public trainyard::Meter, public trainyard::FieldMeter, public trainyard::SampleMeter {
 public:
  CocoMap(int64_t classes, std::vector<int64_t> max_detections)
      : classes_(classes), max_dets_(std::move(max_detections)) {}

  void reset() override { parts_.clear(); }
  void update(const trainyard::MeterInput&) override {
    throw trainyard::ConfigError("coco_map: the batch has no fields",
                                 "expected a detection dataset's batch (boxes, box_labels) and a detector's output",
                                 "use a dataset with target: boxes and a detector network");
  }
  void update_with_fields(const trainyard::MeterInput& in, const trainyard::Fields& f) override {
    namespace name = trainyard::field_name;
    for (const char* needed :
         {name::boxes, name::box_labels, name::detected_boxes, name::detected_labels, name::detected_scores})
      if (!f.count(needed))
        throw trainyard::ConfigError(
            std::string("coco_map: the batch has no field '") + needed + "'",
            "expected ground-truth boxes and labels (a detection dataset: coco with target: boxes) and detections "
            "(a network that decodes them: centernet)",
            "");
    const int64_t b = in.batch.size();
    std::vector<at::Tensor> rows;
    for (int64_t k = 0; k < b; ++k) {
      const double image = f.count(name::image_id)
                               ? static_cast<double>(trainyard::sample_values(f.at(name::image_id), k).item<int64_t>())
                               : static_cast<double>(in.batch.indices[static_cast<size_t>(k)]);
      at::Tensor truth = trainyard::sample_values(f.at(name::boxes), k).to(at::kCPU, at::kDouble);
      if (f.count(name::input_from_original))
        truth = trainyard::boxes_to_original(truth, trainyard::sample_values(f.at(name::input_from_original), k));
      const int64_t n = truth.size(0);
      const at::Tensor labels = trainyard::sample_values(f.at(name::box_labels), k).to(at::kCPU, at::kDouble);
      const at::Tensor crowd = f.count(name::box_crowd)
                                   ? trainyard::sample_values(f.at(name::box_crowd), k).to(at::kCPU, at::kDouble)
                                   : at::zeros({n}, at::kDouble);
      const at::Tensor box_area = (truth.select(1, 2) - truth.select(1, 0)) * (truth.select(1, 3) - truth.select(1, 1));
      const at::Tensor area = f.count(name::box_area)
                                  ? trainyard::sample_values(f.at(name::box_area), k).to(at::kCPU, at::kDouble)
                                  : box_area;
      rows.push_back(at::stack(
          {at::zeros({n}, at::kDouble), at::full({n}, image, at::kDouble), labels, truth.select(1, 0),
           truth.select(1, 1), truth.select(1, 2), truth.select(1, 3), at::zeros({n}, at::kDouble), crowd, area},
          1));
      const at::Tensor found = trainyard::sample_values(f.at(name::detected_boxes), k).to(at::kCPU, at::kDouble);
      const int64_t m = found.size(0);
      const at::Tensor found_area =
          (found.select(1, 2) - found.select(1, 0)) * (found.select(1, 3) - found.select(1, 1));
      rows.push_back(at::stack({at::ones({m}, at::kDouble), at::full({m}, image, at::kDouble),
                                trainyard::sample_values(f.at(name::detected_labels), k).to(at::kCPU, at::kDouble),
                                found.select(1, 0), found.select(1, 1), found.select(1, 2), found.select(1, 3),
                                trainyard::sample_values(f.at(name::detected_scores), k).to(at::kCPU, at::kDouble),
                                at::zeros({m}, at::kDouble), found_area},
                               1));
    }
    parts_.push_back(at::cat(rows));
  }
  std::vector<double> accumulators() const override { return {}; }
  void set_accumulators(const std::vector<double>&) override {}
  at::Tensor rows() const override {
    if (parts_.empty()) return at::Tensor();
    return parts_.size() == 1 ? parts_[0] : at::cat(parts_);
  }
  void set_rows(const at::Tensor& rows) override {
    parts_.clear();
    if (rows.defined()) parts_.push_back(rows);
  }

  std::map<std::string, double> values() const override {
    const at::Tensor all = rows();
    if (!all.defined() || all.size(0) == 0) return {};
    const std::array<double, 12> s = evaluate(all.contiguous());
    static const char* const kNames[12] = {"ap",  "ap50", "ap75",  "ap_small", "ap_medium", "ap_large",
                                           "ar1", "ar10", "ar100", "ar_small", "ar_medium", "ar_large"};
    std::map<std::string, double> v;
    for (size_t i = 0; i < 12; ++i) v[kNames[i]] = s[i];
    return v;
  }

 private:
  // The 12 statistics of COCOeval.summarize() (-1 where nothing is measured).
  std::array<double, 12> evaluate(const at::Tensor& all) const {
    const std::vector<double> thresholds = linspace(0.5, 0.95, 10), recall_points = linspace(0.0, 1.0, 101);
    const std::array<std::array<double, 2>, 4> ranges{{{0, 1e10}, {0, 32 * 32}, {32 * 32, 96 * 96}, {96 * 96, 1e10}}};
    // Boxes by (category, image), images in id order (pycocotools' sorted imgIds).
    std::map<std::pair<int64_t, int64_t>, std::pair<std::vector<Box>, std::vector<Box>>> cells;
    const double* r = all.const_data_ptr<double>();
    for (int64_t i = 0; i < all.size(0); ++i, r += kWidth) {
      const Box box{r[kX1], r[kY1], r[kX2], r[kY2], r[kScore], r[kArea], r[kCrowd] != 0};
      auto& cell = cells[{static_cast<int64_t>(r[kLabel]), static_cast<int64_t>(r[kImage])}];
      (r[kKind] == 0 ? cell.first : cell.second).push_back(box);
    }
    const size_t T = thresholds.size(), R = recall_points.size(), A = ranges.size(), M = max_dets_.size();
    const int64_t largest = *std::max_element(max_dets_.begin(), max_dets_.end());
    // precision[t][r][k][a][m], recall[t][k][a][m]: -1 where a category has no counted ground truth.
    const size_t K = static_cast<size_t>(classes_);
    std::vector<double> precision(T * R * K * A * M, -1), recall(T * K * A * M, -1);
    for (size_t k = 0; k < K; ++k)
      for (size_t a = 0; a < A; ++a) {
        std::vector<ImageEval> evals;
        for (auto it = cells.lower_bound({int64_t(k), std::numeric_limits<int64_t>::min()});
             it != cells.end() && it->first.first == int64_t(k); ++it)
          evals.push_back(evaluate_image(it->second.first, it->second.second, ranges[a], thresholds, largest));
        if (evals.empty()) continue;
        for (size_t m = 0; m < M; ++m)
          accumulate(evals, max_dets_[m], thresholds, recall_points, k, a, m, K, A, M, precision, recall);
      }
    const auto mean = [](const std::vector<double>& values) {
      double sum = 0;
      int64_t n = 0;
      for (const double v : values)
        if (v > -1) sum += v, ++n;
      return n ? sum / static_cast<double>(n) : -1.0;
    };
    const size_t m100 = static_cast<size_t>(std::find(max_dets_.begin(), max_dets_.end(), largest) - max_dets_.begin());
    const auto ap = [&](int threshold, size_t a) {  // threshold: -1 for all, else its index
      std::vector<double> v;
      for (size_t t = 0; t < T; ++t)
        if (threshold < 0 || size_t(threshold) == t)
          for (size_t ri = 0; ri < R; ++ri)
            for (size_t k = 0; k < K; ++k) v.push_back(precision[(((t * R + ri) * K + k) * A + a) * M + m100]);
      return mean(v);
    };
    const auto ar = [&](size_t a, size_t m) {
      std::vector<double> v;
      for (size_t t = 0; t < T; ++t)
        for (size_t k = 0; k < K; ++k) v.push_back(recall[((t * K + k) * A + a) * M + m]);
      return mean(v);
    };
    const size_t m_first = 0, m_second = std::min<size_t>(1, M - 1);
    return {ap(-1, 0),      ap(0, 0),        ap(5, 0),    ap(-1, 1),   ap(-1, 2),   ap(-1, 3),
            ar(0, m_first), ar(0, m_second), ar(0, m100), ar(1, m100), ar(2, m100), ar(3, m100)};
  }

  // pycocotools' evaluateImg for one image, category and area range.
  static ImageEval evaluate_image(std::vector<Box> truth, std::vector<Box> found, const std::array<double, 2>& range,
                                  const std::vector<double>& thresholds, int64_t largest) {
    ImageEval e;
    // Ground truth: not ignored first (a stable sort, as numpy's mergesort).
    std::vector<char> truth_ignored;
    for (const Box& g : truth) truth_ignored.push_back(g.crowd || g.area < range[0] || g.area > range[1]);
    std::vector<size_t> order(truth.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return truth_ignored[a] < truth_ignored[b]; });
    std::vector<Box> g;
    std::vector<char> g_ignored;
    for (const size_t i : order) g.push_back(truth[i]), g_ignored.push_back(truth_ignored[i]);
    // Detections: highest score first, at most the largest maxDets.
    std::stable_sort(found.begin(), found.end(), [](const Box& a, const Box& b) { return a.score > b.score; });
    if (static_cast<int64_t>(found.size()) > largest) found.resize(static_cast<size_t>(largest));
    for (const Box& d : found) e.scores.push_back(d.score);
    for (const char ig : g_ignored) e.counted_truth += !ig;
    const size_t D = found.size(), G = g.size();
    e.matched.assign(thresholds.size(), std::vector<char>(D, 0));
    e.ignored.assign(thresholds.size(), std::vector<char>(D, 0));
    if (D == 0) return e;
    std::vector<double> ious(D * G);
    for (size_t d = 0; d < D; ++d)
      for (size_t j = 0; j < G; ++j) ious[d * G + j] = iou(found[d], g[j]);
    for (size_t t = 0; t < thresholds.size(); ++t) {
      std::vector<char> taken(G, 0);
      for (size_t d = 0; d < D; ++d) {
        double best = std::min(thresholds[t], 1 - 1e-10);
        int64_t m = -1;
        for (size_t j = 0; j < G; ++j) {
          if (taken[j] && !g[j].crowd) continue;                       // matched already, and not a crowd
          if (m > -1 && !g_ignored[size_t(m)] && g_ignored[j]) break;  // a counted match beats the ignored rest
          if (ious[d * G + j] < best) continue;
          best = ious[d * G + j];
          m = static_cast<int64_t>(j);
        }
        if (m == -1) continue;
        e.ignored[t][d] = g_ignored[size_t(m)];
        e.matched[t][d] = 1;
        taken[size_t(m)] = 1;
      }
      for (size_t d = 0; d < D; ++d)  // unmatched detections outside the range are ignored
        if (!e.matched[t][d] && (found[d].area < range[0] || found[d].area > range[1])) e.ignored[t][d] = 1;
    }
    return e;
  }

  // pycocotools' accumulate for one category, area range and maxDets.
  static void accumulate(const std::vector<ImageEval>& evals, int64_t max_dets, const std::vector<double>& thresholds,
                         const std::vector<double>& recall_points, size_t k, size_t a, size_t m, size_t K, size_t A,
                         size_t M, std::vector<double>& precision, std::vector<double>& recall) {
    // An image with neither ground truth nor detections is left out (evaluateImg's None).
    struct Detection {
      double score;
      size_t image, index;
    };
    std::vector<Detection> all;
    int64_t counted = 0;
    for (size_t i = 0; i < evals.size(); ++i) {
      counted += evals[i].counted_truth;
      const size_t n = std::min(evals[i].scores.size(), static_cast<size_t>(max_dets));
      for (size_t d = 0; d < n; ++d) all.push_back({evals[i].scores[d], i, d});
    }
    if (counted == 0) return;
    std::stable_sort(all.begin(), all.end(), [](const Detection& x, const Detection& y) { return x.score > y.score; });
    const size_t T = thresholds.size(), R = recall_points.size();
    for (size_t t = 0; t < T; ++t) {
      std::vector<double> rc, pr;
      double tp = 0, fp = 0;
      for (const Detection& d : all) {
        const ImageEval& e = evals[d.image];
        if (e.ignored[t][d.index]) continue;
        (e.matched[t][d.index] ? tp : fp) += 1;
        rc.push_back(tp / static_cast<double>(counted));
        pr.push_back(tp / (fp + tp + std::numeric_limits<double>::epsilon()));
      }
      // Ignored detections still take a place in numpy's cumulative sums:
      // their rows repeat the previous values, which changes nothing below.
      recall[((t * K + k) * A + a) * M + m] = rc.empty() ? 0 : rc.back();
      for (size_t i = pr.size(); i-- > 1;)
        if (pr[i] > pr[i - 1]) pr[i - 1] = pr[i];
      for (size_t ri = 0; ri < R; ++ri) {
        const size_t at = static_cast<size_t>(std::lower_bound(rc.begin(), rc.end(), recall_points[ri]) - rc.begin());
        precision[(((t * R + ri) * K + k) * A + a) * M + m] = at < pr.size() ? pr[at] : 0;
      }
    }
  }

  int64_t classes_;
  std::vector<int64_t> max_dets_;
  std::vector<at::Tensor> parts_;
};

}  // namespace

trainyard::Schema coco_map_schema() { return coco_map_typed_schema().schema(); }

std::shared_ptr<trainyard::Meter> make_coco_map(const trainyard::Options& options, const trainyard::Context& context) {
  const auto& d = context.dataset;
  if (d.num_classes <= 0)
    throw trainyard::ConfigError("the training dataset reports no classes",
                                 "expected a detection dataset with num_classes > 0 (coco with target: boxes)", "");
  auto o = coco_map_typed_schema().bind(options);
  if (o.max_detections.size() != 3 || !std::is_sorted(o.max_detections.begin(), o.max_detections.end()))
    throw trainyard::ConfigError("max_detections has " + std::to_string(o.max_detections.size()) + " values",
                                 "expected three, smallest first, as COCOeval's maxDets [1, 10, 100]", "");
  return std::make_shared<CocoMap>(d.num_classes, o.max_detections);
}

}  // namespace meters
