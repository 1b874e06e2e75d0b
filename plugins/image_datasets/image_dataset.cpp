#include "image_dataset.h"

#include <fstream>

#include <ATen/ATen.h>
#include <opencv2/imgcodecs.hpp>
#include <trainyard/error.h>

namespace image_datasets {

namespace {
at::Tensor stack_channels(const std::vector<cv::Mat>& images, const TransformOptions& t, uint64_t seed) {
  std::vector<at::Tensor> parts;
  for (const auto& m : images) parts.push_back(apply_transforms(m, t, seed));
  return parts.size() == 1 ? parts[0] : at::cat(parts, 0);
}
}  // namespace

trainyard::Example ImageDataset::get_seeded(int64_t index, uint64_t seed) const {
  LoadedSample s = load(index);
  at::Tensor input = stack_channels(s.inputs, transforms_, seed);
  at::Tensor target = s.targets.empty() ? s.label : stack_channels(s.targets, transforms_, seed);
  return {input, target};
}

trainyard::DatasetInfo ImageDataset::info() const { return info_; }

std::optional<std::map<std::string, trainyard::Value>> ImageDataset::image_preprocessing() const {
  const TransformOptions& t = transforms_;
  return std::map<std::string, trainyard::Value>{
      {"color", t.color},
      {"load_size", t.load_size},
      {"crop", t.crop == "none" || t.crop_size.empty() ? std::string("none") : std::string("center")},
      {"crop_size", t.crop_size},
      {"mean", t.mean},
      {"std", t.std}};
}

void ImageDataset::describe(int64_t num_classes, std::vector<std::string> class_names) {
  info_.size = size();
  info_.num_classes = num_classes;
  info_.class_names = std::move(class_names);
  if (size() > 0) {
    const trainyard::Example first = get_seeded(0, 0);  // alive while its sizes are read
    info_.sample_shape = first.input.sizes().vec();
  }
}

cv::Mat decode_image(const void* data, size_t size, const std::string& what) {
  cv::Mat encoded(1, static_cast<int>(size), CV_8U, const_cast<void*>(data));  // a view, no copy
  cv::Mat image;
  try {
    image = cv::imdecode(encoded, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    throw trainyard::BadRecord(what + ": cannot decode image: " + e.what());
  }
  if (image.empty()) throw trainyard::BadRecord(what + ": cannot decode image (not a PNG/JPEG or damaged)");
  if (image.depth() != CV_8U) image.convertTo(image, CV_8U, image.depth() == CV_16U ? 1.0 / 257 : 1.0);
  return image;
}

cv::Mat read_image(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw trainyard::BadRecord(path + ": cannot open");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return decode_image(bytes.data(), bytes.size(), path);
}

}  // namespace image_datasets
