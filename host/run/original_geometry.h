#pragma once
// Where a predicted sample sits in its original image: the built-in image
// datasets' deterministic preprocessing (a resize, then a center crop or
// none) as predict replays it for an image file, so that masks and boxes
// go back to the image's own pixels (run/dense_predict.cpp and
// run/detection_predict.cpp use it).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "trainyard/options.h"

namespace trainyard::host {

/// The deterministic geometry of Dataset::image_preprocessing's keys: a
/// resize to load_size or to resize_short, then a center crop or none.
struct ImageGeometry {
  std::vector<int64_t> load_size;  ///< [h, w]; empty: no resize to a size
  int64_t resize_short = 0;        ///< the short side's pixels after the resize; 0: none
  bool center_crop = false;
  std::vector<int64_t> crop_size;  ///< [h, w] with center_crop
};
ImageGeometry image_geometry(const std::map<std::string, Value>& preprocessing);

/// An image of `original` size after the resize (image_geometry::resized,
/// the rule the image datasets apply).
cv::Size resized_size(cv::Size original, const ImageGeometry& g);
/// The center crop's rectangle in the resized image (the whole of it without a crop).
cv::Rect center_crop(cv::Size resized, const ImageGeometry& g);

/// The 2x3 map from the original image's pixel coordinates to the input's
/// (SDK field input_from_original): the resize scales pixel edges, the crop
/// shifts them.
cv::Matx23d input_from_original(cv::Size original, const ImageGeometry& g);

/// Refuses what predict cannot put back on original images: an LMDB input
/// (its records keep no original size) and an --output that exists (the
/// folder is written new). `network` ("scores every pixel") and `writes`
/// ("each mask is written at its image's size") say why, in the error.
void check_image_prediction(bool lmdb_input, const std::string& input, const std::string& output,
                            const std::string& network, const std::string& writes);

/// The size of the image stored in the file at `path`: a JPEG's or PNG's
/// header's, another format's decoded; a file that does not decode is a
/// ConfigError naming it (`command`: "predict").
cv::Size stored_size(const std::string& path, const std::string& command);

}  // namespace trainyard::host
