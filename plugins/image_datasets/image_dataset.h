#pragma once
// The shared part of the image datasets: a sample is one or more 8-bit images
// plus a target; get_seeded() transforms every image of a sample with the
// same seed (so input and target images get the same geometry) and stacks
// them along the channels.
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <trainyard/context.h>
#include <trainyard/dataset.h>
#include <trainyard/options.h>

#include "transforms.h"

namespace image_datasets {

struct LoadedSample {
  std::vector<cv::Mat> inputs;
  std::vector<cv::Mat> targets;  ///< images as targets (parallel folders); else use `label`
  at::Tensor label;              ///< int64 scalar class, or float vector
};

class ImageDataset : public trainyard::Dataset {
 public:
  explicit ImageDataset(TransformOptions transforms) : transforms_(std::move(transforms)) {}
  /// Without a seed: the sample as with seed 0.
  trainyard::Example get(int64_t index) const override { return get_seeded(index, 0); }
  trainyard::Example get_seeded(int64_t index, uint64_t seed) const override;
  trainyard::DatasetInfo info() const override;
  /// The deterministic part of the transforms (random crops become center crops).
  std::optional<std::map<std::string, trainyard::Value>> image_preprocessing() const override;

 protected:
  /// Reads and decodes sample `index`. Throws trainyard::BadRecord naming the record.
  virtual LoadedSample load(int64_t index) const = 0;
  /// Call at the end of the constructor: fills info() from sample 0.
  void describe(int64_t num_classes, std::vector<std::string> class_names);

 private:
  TransformOptions transforms_;
  trainyard::DatasetInfo info_;
};

/// Decodes an encoded image (PNG, JPEG, ...) as stored; throws BadRecord.
cv::Mat decode_image(const void* data, size_t size, const std::string& what);
/// Reads an image file; throws BadRecord naming the file.
cv::Mat read_image(const std::string& path);

trainyard::Schema lmdb_schema();
std::shared_ptr<trainyard::Dataset> make_lmdb(const trainyard::Options& options);
trainyard::Schema image_folder_schema();
std::shared_ptr<trainyard::Dataset> make_image_folder(const trainyard::Options& options);
trainyard::Schema csv_schema();
std::shared_ptr<trainyard::Dataset> make_csv(const trainyard::Options& options);

}  // namespace image_datasets
