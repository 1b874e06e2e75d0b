#pragma once
// The shared part of the image datasets: a sample is one or more 8-bit images
// plus a target; get_seeded() transforms every image of a sample with the
// same seed (so input and target images get the same geometry) and stacks
// them along the channels.
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <trainyard/context.h>
#include <trainyard/dataset.h>
#include <trainyard/image_codec.h>
#include <trainyard/options.h>
#include <opencv2/core.hpp>

#include "gpu_decode.h"
#include "transforms.h"

namespace image_datasets {

/// One image as its source holds it: encoded bytes, decoded by ImageDataset
/// (at a reduced scale where the crop allows), or pixels already.
struct SourceImage {
  std::string bytes;       ///< the encoded file (JPEG, PNG, ...); empty when `pixels` is set
  cv::Mat pixels;          ///< raw records: the pixels as stored
  std::string what;        ///< "FILE" or "record K image I (jpeg)": named in errors
  cv::Size expected_size;  ///< the size the source says the image has; empty: not said
};

struct LoadedSample {
  std::vector<SourceImage> inputs;
  std::vector<SourceImage> targets;  ///< images as targets (parallel folders); else use `label`
  at::Tensor label;                  ///< int64 scalar class, or float vector
};

class ImageDataset : public trainyard::Dataset {
 public:
  explicit ImageDataset(TransformOptions transforms)
      : transforms_(std::move(transforms)), target_transforms_(as_float(transforms_)) {}
  /// Without a seed: the sample as with seed 0.
  trainyard::Example get(int64_t index) const override { return get_seeded(index, 0); }
  trainyard::Example get_seeded(int64_t index, uint64_t seed) const override;
  trainyard::DatasetInfo info() const override;
  /// The deterministic part of the transforms (random crops become center crops).
  std::optional<std::map<std::string, trainyard::Value>> image_preprocessing() const override;
  /// output: uint8 (the default): mean and std, for the host to apply per batch.
  std::optional<trainyard::InputNormalization> input_normalization() const override;
  /// With decode: gpu (or auto choosing it): the batch's JPEGs decoded by the
  /// decoder into uint8 rows on its device (decode_batch_on_gpu); else the
  /// samples one by one through the CPU path.
  trainyard::Batch get_batch(const std::vector<int64_t>& indices, const std::vector<uint64_t>& seeds) const override;

  /// Called by the plugin's factories once the dataset is built: applies the
  /// `decode` option for the run's device and says in the log what decodes.
  /// decode: gpu where it cannot apply is a ConfigError (on a CUDA device) or
  /// one line and the CPU path (a run, dry run or sweep on the CPU).
  void choose_decoder(const trainyard::Context& context);
  /// Decodes JPEG batches with `decoder` from now on (the tests: the reference
  /// decoder, which runs the GPU path on the CPU); `log` hears of fallbacks.
  /// For a dataset of 3-channel samples only (trainyard::Error otherwise).
  void use_decoder(std::shared_ptr<const JpegBatchDecoder> decoder,
                   std::function<void(const std::string&)> log = nullptr);
  /// Samples the GPU path decoded, and those it left to the CPU path.
  struct DecodeCounts {
    int64_t gpu = 0, cpu = 0;
  };
  DecodeCounts decode_counts() const { return {gpu_decoded_.load(), cpu_decoded_.load()}; }

 protected:
  /// Reads and decodes sample `index`. Throws trainyard::BadRecord naming the record.
  virtual LoadedSample load(int64_t index) const = 0;
  /// A loaded sample transformed: get_seeded() is example_of(load(index), seed).
  trainyard::Example example_of(const LoadedSample& sample, uint64_t seed) const;
  /// Call at the end of the constructor: fills info() from sample 0. An
  /// unreadable sample 0 is a DataError naming `source` ("database 'db'").
  void describe(int64_t num_classes, std::vector<std::string> class_names, const std::string& source);
  bool decodes_on_gpu() const { return decoder_ != nullptr; }
  const TransformOptions& transforms() const { return transforms_; }
  /// The GPU path for samples already loadable with load(): every JPEG it
  /// takes decoded by decoder_, the rest (other formats, CMYK, several images
  /// per sample, what nvJPEG refuses) through the CPU path into their rows,
  /// counted and logged. A damaged record throws BadRecord as load() and the
  /// CPU path do, and the host then retries the batch sample by sample.
  trainyard::Batch decode_batch_on_gpu(const std::vector<int64_t>& indices, const std::vector<uint64_t>& seeds) const;
  /// The same for samples already loaded (samples[k] is sample indices[k]).
  trainyard::Batch decode_loaded_on_gpu(const std::vector<LoadedSample>& samples, const std::vector<int64_t>& indices,
                                        const std::vector<uint64_t>& seeds) const;

 private:
  static TransformOptions as_float(TransformOptions t) {
    t.output = "float";  // image targets stay float: the host normalizes inputs only
    return t;
  }
  /// A sample's target: its label, its target images (target: image), or its mask (target: mask).
  at::Tensor target_of(const LoadedSample& sample, uint64_t seed) const;
  /// Why `sample` goes through the CPU path, or nothing with `job` filled.
  std::optional<std::string> plan_gpu_job(const LoadedSample& sample, uint64_t seed, cv::Size out, GpuJob& job) const;
  void note_cpu_decode(const std::string& what, const std::string& why) const;

  TransformOptions transforms_;
  TransformOptions target_transforms_;  ///< transforms_ with float output
  trainyard::DatasetInfo info_;
  std::shared_ptr<const JpegBatchDecoder> decoder_;  ///< decode: gpu (or auto choosing it); null: the CPU path
  std::function<void(const std::string&)> log_;
  mutable std::atomic<int64_t> gpu_decoded_{0}, cpu_decoded_{0};
};

/// `decode: auto` picks the GPU below this many CPUs per GPU: on an H200 with
/// 15 decode threads the CPU path fed ResNet-18 at 38% and ResNet-50 at 69%
/// of the GPU's rate (docs/performance.md).
constexpr int kAutoGpuDecodeBelowCpusPerGpu = 16;

/// The most pixels an encoded image's header may claim: checked before a
/// frame is allocated (a BadRecord above it); the codecs' own limit.
constexpr uint64_t kMaxImagePixels = trainyard::image_codec::kMaxPixels;

/// Decodes an encoded image (PNG, JPEG, ...) with its channels as stored, in
/// 8 bits (16-bit images scaled by 1/257) or, with `keep_depth` (masks of
/// class ids), as stored; throws BadRecord.
cv::Mat decode_image(const void* data, size_t size, const std::string& what, bool keep_depth = false);
/// Reads a file's bytes; throws BadRecord naming the file.
std::string read_file_bytes(const std::string& path);

/// True when a JPEG's bytes end its last scan with the end-of-image marker:
/// false for a file cut short (libjpeg would decode it with grey filling).
bool jpeg_is_complete(const void* data, size_t size);

/// A baseline or progressive JPEG's size and colour components, read from its
/// frame header (image_codec::read_header); nothing for other formats or a
/// header that cannot be read.
struct JpegHeader {
  cv::Size size;
  int components = 0;  ///< 1 grey, 3 YCbCr, 4 CMYK/YCCK
};
std::optional<JpegHeader> read_jpeg_header(const void* data, size_t size);

/// The options of lmdb, image_folder and csv: the one path each reads (lmdb's
/// path, image_folder's root, csv's file), then the transforms.
struct PathDatasetOptions : TransformOptions {
  std::string path;  ///< absolute: the host resolves it against the experiment file's folder
};
/// Their schema: `key`, a required path option bound to `path`, then the
/// transform options (`boxes`: with target: boxes, add_transform_options).
template <class T = PathDatasetOptions>
trainyard::TypedSchema<T> path_dataset_schema(const std::string& key, const std::string& description,
                                              bool boxes = false) {
  trainyard::TypedSchema<T> s;
  s.require_path(key, &T::path, description);
  add_transform_options(s, boxes);
  return s;
}

/// webdataset's options: local shards use urls and num_classes, pipe: streams all.
struct WebDatasetOptions : TransformOptions {
  std::string urls;
  int64_t num_classes = 0;
  int64_t size = 0;
  int64_t shuffle_buffer = 0;
  bool shuffle_shards = false;
  int64_t read_ahead = 0;
  double start_timeout = 0;  ///< pipe: seconds to wait for the first sample at start-up
  std::string mask_member;   ///< target: mask: the extension of each sample's mask member ("mask.png": KEY.mask.png)
  std::string box_member;    ///< target: boxes: the extension of each sample's boxes member ("boxes.json")
};

trainyard::Schema lmdb_schema();
std::shared_ptr<trainyard::Dataset> make_lmdb(const trainyard::Options& options);
trainyard::Schema image_folder_schema();
std::shared_ptr<trainyard::Dataset> make_image_folder(const trainyard::Options& options);
trainyard::Schema webdataset_schema();
/// Local shards (indexed), or `pipe:` urls (streamed: make_streamed_webdataset).
std::shared_ptr<trainyard::Dataset> make_webdataset(const trainyard::Options& options,
                                                    const trainyard::Context& context);
std::shared_ptr<trainyard::Dataset> make_streamed_webdataset(const WebDatasetOptions& options,
                                                             const trainyard::Context& context);
/// A WebDataset shard pattern's names: the first {A..B} (zero-padded to A's
/// width) or {x,y} is expanded, then the rest: "s-{00..02}.tar" -> s-00.tar, s-01.tar, s-02.tar.
/// More than kMaxShardNames names is a ConfigError, found before any is made.
std::vector<std::string> expand_braces(const std::string& pattern);
constexpr uint64_t kMaxShardNames = 1'000'000;
trainyard::Schema csv_schema();
std::shared_ptr<trainyard::Dataset> make_csv(const trainyard::Options& options);
trainyard::Schema coco_schema();
/// A COCO instances JSON and its images: target: mask only (coco_dataset.cpp).
std::shared_ptr<trainyard::Dataset> make_coco(const trainyard::Options& options);

}  // namespace image_datasets
