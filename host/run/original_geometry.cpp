#include "run/original_geometry.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "trainyard/error.h"
#include "trainyard/image_codec.h"
#include "trainyard/image_geometry.h"
#include "util/files.h"

namespace trainyard::host {

namespace {
template <class T>
T value_or(const std::map<std::string, Value>& values, const std::string& key, T fallback) {
  const auto it = values.find(key);
  if (it == values.end()) return fallback;
  const T* v = std::get_if<T>(&it->second);
  return v ? *v : fallback;
}
}  // namespace

ImageGeometry image_geometry(const std::map<std::string, Value>& preprocessing) {
  ImageGeometry g;
  g.load_size = value_or<std::vector<int64_t>>(preprocessing, "load_size", {});
  g.resize_short = value_or<int64_t>(preprocessing, "resize_short", 0);
  g.crop_size = value_or<std::vector<int64_t>>(preprocessing, "crop_size", {});
  g.center_crop = value_or<std::string>(preprocessing, "crop", "none") != "none" && g.crop_size.size() == 2;
  return g;
}

cv::Size resized_size(cv::Size original, const ImageGeometry& g) {
  return image_geometry::resized(original, g.load_size, g.resize_short);
}

cv::Rect center_crop(cv::Size resized, const ImageGeometry& g) {
  if (!g.center_crop) return {0, 0, resized.width, resized.height};
  return image_geometry::center_crop(resized, static_cast<int>(g.crop_size[0]), static_cast<int>(g.crop_size[1]));
}

cv::Matx23d input_from_original(cv::Size original, const ImageGeometry& g) {
  const cv::Size resized = resized_size(original, g);
  const cv::Rect crop = center_crop(resized, g);
  const double sx = double(resized.width) / original.width, sy = double(resized.height) / original.height;
  return {sx, 0, -double(crop.x), 0, sy, -double(crop.y)};
}

void check_image_prediction(bool lmdb_input, const std::string& input, const std::string& output,
                            const std::string& network, const std::string& writes) {
  if (lmdb_input)
    throw ConfigError("predict: --input " + input + " is an LMDB, and the network " + network,
                      "expected a folder of image files: " + writes + ", which an LMDB's records do not keep", "");
  if (std::filesystem::exists(output))
    throw ConfigError("predict: --output " + output + " exists", "expected a new folder (the network " + network + ")",
                      "remove it or choose another");
}

cv::Size stored_size(const std::string& path, const std::string& command) {
  const std::string bytes = read_whole_file(path);
  // A JPEG's or PNG's header says it; the predictions were made from the
  // decoded pixels, so a header that lies had failed the dataset already.
  if (const auto h = image_codec::read_header(bytes.data(), bytes.size());
      h && h->width * h->height <= image_codec::kMaxPixels)
    return {static_cast<int>(h->width), static_cast<int>(h->height)};
  try {
    return image_codec::decode(bytes.data(), bytes.size()).size();
  } catch (const image_codec::Error& e) {
    throw ConfigError(command + ": " + path + ": cannot decode it (" + e.what() + ")", "expected an image file", "");
  }
}

}  // namespace trainyard::host
