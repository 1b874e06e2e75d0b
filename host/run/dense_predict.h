#pragma once
// `trainyard predict` for networks that score every pixel ([B, C, H, W]
// outputs, a U-Net's): one PNG of class ids per input image, at the image's
// own size, beside a CSV that lists them (run/model.cpp calls it).
#include <cstdint>

#include <opencv2/core.hpp>

#include "run/loaded_model.h"
#include "run/mode_requests.h"
#include "run/original_geometry.h"

namespace trainyard::host {

/// A mask predicted for the network's input (the crop of the resized image)
/// put back on an image of `original` size: the crop placed where it was
/// cut, `unknown` around it, the whole resized back by nearest neighbour so
/// that no class id is mixed with another.
cv::Mat mask_at_original_size(const cv::Mat& predicted, cv::Size original, const ImageGeometry& geometry, int unknown);

/// True when `network` scores each pixel of an input of the shape it was
/// trained on: one forward of zeros, [1, C, H, W] out for [1, c, H, W] in.
bool scores_pixels(const LoadedModel& m);

/// Writes request.output as a folder (it must not exist): masks/ (one PNG
/// per image, its path below the input folder with .png, 8-bit ids, or 16
/// bits past 255 classes) and predictions.csv (index, source, mask, height,
/// width). Image files only: an LMDB's records do not keep their original
/// size. Returns the images written.
int64_t predict_masks(const LoadedModel& m, InputSet& input, const PredictRequest& request);

}  // namespace trainyard::host
