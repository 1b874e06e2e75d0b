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
///
/// `region` (full-size coordinates; empty: all): only the rows and columns
/// around it are decoded (libjpeg-turbo's jpeg_skip_scanlines and
/// jpeg_crop_scanline skip the inverse DCT, upsampling and colour conversion
/// elsewhere, and rows below it are not read at all). The image keeps its
/// full reduced size; pixels more than kRegionMargin outside the region are
/// left unset. Inside, they are the whole decode's.
std::optional<cv::Mat> decode_jpeg(const void* data, size_t size, int reduction, const std::string& what,
                                   cv::Rect region = {});

/// Decoded pixels around a region, on each side: upsampling reads
/// neighbours, and the region's edges are rounded to the reduced grid.
constexpr int kRegionMargin = 16;

}  // namespace image_datasets
