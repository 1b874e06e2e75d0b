#pragma once
/// The deterministic geometry of the built-in image datasets: the resize to
/// load_size or resize_short, and the center crop. The datasets apply it
/// (with their random crops and flips), `trainyard predict` replays it to put
/// masks and boxes back on the original image, so both take it from here. A
/// dataset plugin of another team with the same options may use it too.
///
/// Example:
///   const cv::Size resized = trainyard::image_geometry::resized(original, {}, 256);  // short side 256
///   const cv::Rect crop = trainyard::image_geometry::center_crop(resized, 224, 224);
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <opencv2/core.hpp>

namespace trainyard::image_geometry {

/// An image of `original` size resized: to load_size {height, width} when
/// given, else its short side to resize_short (> 0; each side rounded to the
/// nearest pixel, at least 1), else not at all.
inline cv::Size resized(cv::Size original, const std::vector<int64_t>& load_size, int64_t resize_short) {
  if (load_size.size() == 2) return {static_cast<int>(load_size[1]), static_cast<int>(load_size[0])};
  if (resize_short <= 0) return original;
  const double scale = static_cast<double>(resize_short) / std::min(original.width, original.height);
  return {std::max(1, static_cast<int>(std::lround(original.width * scale))),
          std::max(1, static_cast<int>(std::lround(original.height * scale)))};
}

/// The rows x cols center crop of an image of `size`: half of each margin
/// before it, rounded down.
inline cv::Rect center_crop(cv::Size size, int rows, int cols) {
  return {(size.width - cols) / 2, (size.height - rows) / 2, cols, rows};
}

}  // namespace trainyard::image_geometry
