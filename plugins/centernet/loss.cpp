// centernet_loss: the paper's loss. A focal loss on the heatmaps (penalty-
// reduced near each peak by (1 - target)^4), L1 on the size and the offset at
// each object's centre cell, each normalized by the number of objects.
// Crowd boxes (box_crowd) are no objects to find and draw no targets.
#include <trainyard/error.h>

#include <ATen/ATen.h>

#include "centernet.h"

namespace centernet {
namespace {

struct LossOptions {
  double size_weight = 0;
  double offset_weight = 0;
  double min_overlap = 0;
};

const trainyard::TypedSchema<LossOptions>& loss_typed_schema() {
  static const trainyard::TypedSchema<LossOptions> s = [] {
    using O = LossOptions;
    trainyard::TypedSchema<O> t;
    t.add("size_weight", &O::size_weight, 0.1, "weight of the L1 loss on width and height (in grid cells)").min(0.0);
    t.add("offset_weight", &O::offset_weight, 1.0, "weight of the L1 loss on the centre's offset in its cell").min(0.0);
    t.add("min_overlap", &O::min_overlap, 0.7,
          "a peak's radius: the box moved that far still overlaps itself this much (IoU)")
        .range(0.01, 0.99);
    return t;
  }();
  return s;
}

class CenterNetLoss : public trainyard::Loss, public trainyard::FieldLoss {
 public:
  explicit CenterNetLoss(const LossOptions& o) : o_(o) {}

  at::Tensor compute(const at::Tensor&, const trainyard::Batch&) override {
    throw trainyard::ConfigError("centernet_loss: the batch has no boxes",
                                 "expected a detection dataset's batch (fields boxes and box_labels: coco with "
                                 "target: boxes)",
                                 "");
  }

  at::Tensor compute_with_fields(const at::Tensor& output, const trainyard::Batch& batch,
                                 const trainyard::Fields& fields) override {
    namespace name = trainyard::field_name;
    if (!fields.count(name::boxes) || !fields.count(name::box_labels))
      return compute(output, batch);  // says what is missing
    const int64_t b = output.size(0), k = output.size(1) - 4, rows = output.size(2), cols = output.size(3);
    if (k < 1 || output.dim() != 4)
      throw trainyard::ConfigError("centernet_loss: an output of " + std::to_string(output.dim()) + " dimensions",
                                   "expected [B, classes + 4, H / 4, W / 4] (the centernet network's)", "");
    std::vector<at::Tensor> heatmaps;
    std::vector<int64_t> cells;
    std::vector<float> regress;
    for (int64_t i = 0; i < b; ++i) {
      at::Tensor boxes = trainyard::sample_values(fields.at(name::boxes), i);
      at::Tensor labels = trainyard::sample_values(fields.at(name::box_labels), i);
      if (fields.count(name::box_crowd)) {
        const at::Tensor counted = trainyard::sample_values(fields.at(name::box_crowd), i).eq(0).to(at::kCPU);
        boxes = boxes.to(at::kCPU).index({counted});
        labels = labels.to(at::kCPU).index({counted});
      }
      const Targets t = draw_targets(boxes, labels, k, rows, cols, o_.min_overlap);
      heatmaps.push_back(t.heatmaps);
      for (size_t j = 0; j < t.cells.size(); ++j) {
        cells.push_back(i * k * rows * cols + t.cells[j]);
        regress.insert(regress.end(), t.regress[j].begin(), t.regress[j].end());
      }
    }
    const auto device = output.device();
    const at::Tensor target = at::stack(heatmaps).to(device, /*non_blocking=*/true);
    const at::Tensor p = output.narrow(1, 0, k).to(at::kFloat).sigmoid().clamp(1e-4, 1 - 1e-4);
    const at::Tensor peak = target.eq(1).to(at::kFloat);
    const auto objects = static_cast<double>(std::max<size_t>(1, cells.size()));
    const at::Tensor focal =
        -(peak * (1 - p).pow(2) * p.log() + (1 - peak) * (1 - target).pow(4) * p.pow(2) * (1 - p).log()).sum() /
        objects;
    if (cells.empty()) return focal;
    // The regressions at each object's cell: [objects, 4] against the targets.
    const auto n = static_cast<int64_t>(cells.size());
    const at::Tensor where = at::tensor(cells, at::kLong).to(device);
    const at::Tensor sample = where.div(k * rows * cols, "floor"), cell = where.remainder(rows * cols);
    const at::Tensor regression =
        output.narrow(1, k, 4).to(at::kFloat).permute({0, 2, 3, 1}).reshape({b * rows * cols, 4});
    const at::Tensor predicted = regression.index_select(0, sample * rows * cols + cell);
    const at::Tensor wanted = at::tensor(regress, at::kFloat).view({n, 4}).to(device);
    const at::Tensor l1 = (predicted - wanted).abs();
    return focal + o_.size_weight * l1.narrow(1, 0, 2).sum() / objects +
           o_.offset_weight * l1.narrow(1, 2, 2).sum() / objects;
  }

 private:
  LossOptions o_;
};

}  // namespace

trainyard::Schema loss_schema() { return loss_typed_schema().schema(); }

std::shared_ptr<trainyard::Loss> make_loss(const trainyard::Options& options, const trainyard::Context&) {
  return std::make_shared<CenterNetLoss>(loss_typed_schema().bind(options));
}

}  // namespace centernet
