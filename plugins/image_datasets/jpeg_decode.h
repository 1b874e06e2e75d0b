#pragma once
// JPEG decode through libjpeg-turbo's libjpeg API: straight to OpenCV's BGR
// (or grey) layout, at 1/1, 1/2, 1/4 or 1/8 scale by the scaled IDCT. It
// measured 1.5-2.7x cv::imdecode's speed on the photo set, which converts
// colour in a loop of its own after libjpeg.
#include <cstddef>
#include <optional>
#include <string>

#include <opencv2/core.hpp>

namespace image_datasets {

/// Decodes a JPEG with 1 (grey) or 3 (YCbCr) components at 1/`reduction` of
/// its size (1, 2, 4 or 8): CV_8UC3 BGR or CV_8UC1. Nothing for a JPEG this
/// path does not take (CMYK, a header libjpeg refuses): decode it with
/// OpenCV. Throws trainyard::BadRecord naming `what` for data libjpeg cannot
/// decode past its header.
std::optional<cv::Mat> decode_jpeg(const void* data, size_t size, int reduction, const std::string& what);

}  // namespace image_datasets
