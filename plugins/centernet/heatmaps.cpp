// The targets CenterNet learns: Gaussian peaks at box centres, and the box's
// size and offset at the peak's cell.
#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>

#include "centernet.h"

namespace centernet {

double peak_radius(double height, double width, double min_overlap) {
  // Each case solves r^2 a + r b + c = 0 for the largest r (the paper's
  // three cases: both corners moved inward, outward, or one each way).
  const auto root = [](double a, double b, double c) { return (b + std::sqrt(std::max(0.0, b * b - 4 * a * c))) / 2; };
  const double sum = height + width, area = height * width;
  const double both_out = root(1, sum, area * (1 - min_overlap) / (1 + min_overlap));
  const double both_in = root(4, 2 * sum, (1 - min_overlap) * area);
  const double one_each = root(4 * min_overlap, -2 * min_overlap * sum, (min_overlap - 1) * area);
  return std::min({both_out, both_in, one_each});
}

Targets draw_targets(const at::Tensor& boxes, const at::Tensor& labels, int64_t classes, int64_t rows, int64_t cols,
                     double min_overlap) {
  Targets t;
  t.heatmaps = at::zeros({classes, rows, cols}, at::kFloat);
  float* heat = t.heatmaps.mutable_data_ptr<float>();
  const at::Tensor b = boxes.to(at::kCPU, at::kDouble).contiguous();
  const at::Tensor l = labels.to(at::kCPU, at::kLong).contiguous();
  const double* xyxy = b.const_data_ptr<double>();
  for (int64_t i = 0; i < b.size(0); ++i, xyxy += 4) {
    const int64_t label = l[i].item<int64_t>();
    const double w = (xyxy[2] - xyxy[0]) / kStride, h = (xyxy[3] - xyxy[1]) / kStride;
    const double cx = (xyxy[0] + xyxy[2]) / 2 / kStride, cy = (xyxy[1] + xyxy[3]) / 2 / kStride;
    const int64_t col = std::clamp<int64_t>(static_cast<int64_t>(std::floor(cx)), 0, cols - 1);
    const int64_t row = std::clamp<int64_t>(static_cast<int64_t>(std::floor(cy)), 0, rows - 1);
    const int64_t r = std::max<int64_t>(0, static_cast<int64_t>(peak_radius(h, w, min_overlap)));
    const double sigma = (2 * r + 1) / 6.0;
    float* plane = heat + label * rows * cols;
    for (int64_t y = std::max<int64_t>(0, row - r); y <= std::min(rows - 1, row + r); ++y)
      for (int64_t x = std::max<int64_t>(0, col - r); x <= std::min(cols - 1, col + r); ++x) {
        const double d2 = double((x - col) * (x - col) + (y - row) * (y - row));
        const float g = static_cast<float>(std::exp(-d2 / (2 * sigma * sigma)));
        plane[y * cols + x] = std::max(plane[y * cols + x], g);
      }
    t.cells.push_back(label * rows * cols + row * cols + col);
    t.regress.push_back(
        {static_cast<float>(w), static_cast<float>(h), static_cast<float>(cx - col), static_cast<float>(cy - row)});
  }
  return t;
}

}  // namespace centernet
