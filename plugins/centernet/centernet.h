#pragma once
// CenterNet ("Objects as Points", Zhou, Wang and Krähenbühl, 2019): a
// detector that predicts, on a grid of stride 4, one heatmap per class whose
// peaks are object centres, and at each cell the object's width and height
// and the centre's offset within the cell. Peaks are found by a 3x3 max
// pool: no anchors and no non-maximum suppression.
//
// The network's output is [B, K + 4, H / 4, W / 4]: K heatmap logits, then
// width and height (in grid cells), then the x and y offsets. The loss reads
// the batch's boxes (SDK 1.5 fields) and draws the targets itself.
#include <array>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <trainyard/context.h>
#include <trainyard/fields.h>
#include <trainyard/loss.h>
#include <trainyard/network.h>
#include <trainyard/options.h>

namespace centernet {

/// Cells of the output grid per input pixel, each way.
constexpr int64_t kStride = 4;

trainyard::Schema network_schema();
std::shared_ptr<trainyard::Network> make_network(const trainyard::Options& options, const trainyard::Context& context);
trainyard::Schema loss_schema();
std::shared_ptr<trainyard::Loss> make_loss(const trainyard::Options& options, const trainyard::Context& context);

/// The training targets of one sample on a grid of `rows` x `cols` cells:
/// each box (x1, y1, x2, y2 in input pixels) puts a Gaussian peak of 1 at
/// its centre's cell in its class's heatmap (other boxes' peaks kept by the
/// maximum), its size and the centre's offset at that cell.
struct Targets {
  at::Tensor heatmaps;                        ///< float {K, rows, cols}
  std::vector<int64_t> cells;                 ///< class * rows * cols + row * cols + col, per box
  std::vector<std::array<float, 4>> regress;  ///< width, height (cells), x and y offsets, per box
};
Targets draw_targets(const at::Tensor& boxes, const at::Tensor& labels, int64_t classes, int64_t rows, int64_t cols,
                     double min_overlap);

/// The radius (in cells) of a box's peak: the largest by which a box of
/// `height` x `width` cells may be moved and still overlap itself by
/// `min_overlap` (intersection over union), for the three ways the corners
/// can move.
double peak_radius(double height, double width, double min_overlap);

}  // namespace centernet
