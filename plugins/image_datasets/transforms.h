#pragma once
// Image transforms done with OpenCV, configured from YAML and seeded per
// sample: the same (options, seed, image) always gives the same tensor.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <ATen/core/Tensor.h>
#include <trainyard/options.h>
#include <trainyard/random.h>
#include <opencv2/core.hpp>

namespace image_datasets {

struct TransformOptions {
  std::string color = "keep";            ///< keep | gray | rgb
  std::vector<int64_t> load_size;        ///< [h, w]: resize first; empty: keep
  int64_t resize_short = 0;              ///< resize first so the short side has this many pixels (aspect kept); 0: keep
  std::string crop = "none";             ///< none | center | random | random_resized
  std::vector<int64_t> crop_size;        ///< [h, w]
  std::vector<double> scale{0.08, 1.0};  ///< random_resized: area fraction range
  std::vector<double> ratio{0.75, 1.3333333};           ///< random_resized: aspect ratio range
  double hflip = 0, vflip = 0;                          ///< probabilities
  double rotate_degrees = 0;                            ///< uniform in [-r, r]
  double translate = 0;                                 ///< fraction of the size, uniform in [-t, t] per axis
  double brightness = 0, contrast = 0, saturation = 0;  ///< jitter factors uniform in [1-x, 1+x]
  double lighting = 0;                                  ///< std of AlexNet-style PCA lighting noise (RGB only)
  std::vector<double> mean, std;                        ///< per channel, on [0, 1] values; empty: no normalization
  /// uint8 (the datasets' default option): inputs leave as 8-bit pixels and
  /// the host normalizes them per batch on the network's device
  /// (Dataset::input_normalization); float: normalized here, per sample.
  std::string output = "float";
  /// cpu (the decode threads decode JPEGs with libjpeg-turbo), gpu (nvJPEG on
  /// the run's GPU: gpu_decode.h), auto (the GPU where the run is on one and
  /// has few CPUs per GPU; choose_decoder says which and why).
  std::string decode = "cpu";
  /// What a sample's target images are (an LMDB of `convert --from parallel`):
  /// image (transformed as the input, float) or mask (class ids:
  /// apply_mask_transforms, int64 {H, W}).
  std::string target = "image";
  int64_t ignore_index = 255;     ///< target: mask: the id of pixels a rotation or translation brings in
  int64_t mask_classes = 0;       ///< target: mask: the classes the masks hold (ids 0 to mask_classes - 1)
  double min_box_visible = 0.25;  ///< target: boxes: a box keeps at least this share of its area after a crop
  double min_box_size = 1;        ///< target: boxes: ... and this width and height in the sample's pixels
};

/// Declares the transform options in the schema of a dataset whose options
/// struct T derives from TransformOptions: bind() fills them with the rest.
/// `boxes`: the dataset also reads boxes (coco, lmdb, webdataset), so
/// `target` may be boxes, with min_box_visible and min_box_size.
template <class T>
void add_transform_options(trainyard::TypedSchema<T>& s, bool boxes = false) {
  static_assert(std::is_base_of_v<TransformOptions, T>, "a dataset's options derive from TransformOptions");
  // A TransformOptions field as a field of T (the schema binds T's fields).
  const auto in_t = []<class F>(F TransformOptions::*field) -> F T::* { return field; };
  using O = TransformOptions;
  s.add("color", in_t(&O::color), "keep", "keep (as decoded), gray (1 channel) or rgb (3 channels)")
      .one_of({"keep", "gray", "rgb"});
  s.add("load_size", in_t(&O::load_size), {}, "[height, width] to resize to before cropping; [] keeps the size")
      .range(1, 16384);
  s.add("resize_short", in_t(&O::resize_short), 0,
        "resize so the short side has this many pixels, keeping the aspect ratio "
        "(ImageNet validation: 256, then crop: center, crop_size: [224, 224]); 0 keeps the size")
      .range(0, 16384);
  s.add("crop", in_t(&O::crop), "none", "none, center, random, or random_resized (scale jitter)")
      .one_of({"none", "center", "random", "random_resized"});
  s.add("crop_size", in_t(&O::crop_size), {}, "[height, width] of the crop").range(1, 16384);
  s.add("scale", in_t(&O::scale), {0.08, 1.0}, "random_resized: range of the crop's area fraction").range(0.0, 1.0);
  s.add("ratio", in_t(&O::ratio), {0.75, 4.0 / 3.0}, "random_resized: range of the crop's aspect ratio").min(0.01);
  s.add("hflip", in_t(&O::hflip), 0.0, "probability of a horizontal flip").range(0.0, 1.0);
  s.add("vflip", in_t(&O::vflip), 0.0, "probability of a vertical flip").range(0.0, 1.0);
  s.add("rotate_degrees", in_t(&O::rotate_degrees), 0.0, "rotation by an angle uniform in [-r, r] degrees")
      .range(0.0, 180.0);
  s.add("translate", in_t(&O::translate), 0.0, "translation by up to this fraction of the size, per axis")
      .range(0.0, 0.5);
  s.add("brightness", in_t(&O::brightness), 0.0, "brightness factor uniform in [1-x, 1+x]").range(0.0, 1.0);
  s.add("contrast", in_t(&O::contrast), 0.0, "contrast factor uniform in [1-x, 1+x]").range(0.0, 1.0);
  s.add("saturation", in_t(&O::saturation), 0.0, "saturation factor uniform in [1-x, 1+x] (color images)")
      .range(0.0, 1.0);
  s.add("lighting", in_t(&O::lighting), 0.0,
        "std of PCA lighting noise (AlexNet's ImageNet eigenvectors; color images)")
      .range(0.0, 1.0);
  s.add("mean", in_t(&O::mean), {}, "per-channel mean subtracted from [0, 1] values; [] for none");
  s.add("std", in_t(&O::std), {}, "per-channel std divided by; [] for none").min(1e-6);
  s.add("output", in_t(&O::output), "uint8",
        "uint8: samples stay 8-bit pixels and trainyard converts and normalizes each batch on the network's "
        "device (a quarter of the memory and of the host-to-GPU bytes); float: normalized per sample while decoding")
      .one_of({"uint8", "float"});
  s.add("decode", in_t(&O::decode), "cpu",
        "where JPEGs are decoded: cpu (the decode threads, libjpeg-turbo), gpu (nvJPEG on the run's GPU; crops, "
        "resizes and flips there too; other files and what nvJPEG refuses go through the CPU path), or auto (gpu "
        "when the run is on a GPU with fewer than 16 CPUs per GPU and the transforms allow it; the log says which)")
      .one_of({"cpu", "gpu", "auto"});
  s.add("target", in_t(&O::target), "image",
        "what a sample's target is: image (an LMDB converted with --from parallel --target DIR: the input's "
        "transforms, float) or mask (class ids in one 8- or 16-bit channel, a grey PNG: the input's resize, crop, "
        "flips, rotation and translation, nearest neighbour, nothing else; int64 [H, W]). Masks come from an LMDB "
        "converted with --from parallel --target MASKS, image_folder's masks folder or csv's image,mask lines" +
            std::string(boxes ? "; or boxes (coco, or an LMDB or shards converted with --from coco --coco-target "
                                "boxes: the target is then the image's count of boxes, and the boxes, their labels "
                                "and the geometry are the sample's fields)"
                              : ""))
      .one_of(boxes ? std::vector<std::string>{"mask", "boxes", "image"} : std::vector<std::string>{"image", "mask"});
  s.add("ignore_index", in_t(&O::ignore_index), 255,
        "target: mask: the id of pixels a rotation or translation brings in from outside the image (give the loss "
        "and meters the same ignore_index)")
      .range(0, 65535);
  s.add("mask_classes", in_t(&O::mask_classes), 0,
        "target: mask: how many classes the masks hold (ids 0 to mask_classes - 1, besides ignore_index); the "
        "dataset's class count")
      .range(0, 65535);
  if (!boxes) return;
  s.add("min_box_visible", in_t(&O::min_box_visible), 0.25,
        "target: boxes: a box a crop or rotation cuts is kept when at least this share of its area is left")
      .range(0.0, 1.0);
  s.add("min_box_size", in_t(&O::min_box_size), 1.0,
        "target: boxes: a kept box is at least this many pixels wide and high in the sample")
      .min(0.0);
}
/// Why `decode: gpu` cannot apply these transforms (the GPU path crops,
/// resizes and flips into uint8 pixels, nothing else), or nothing.
std::optional<std::string> gpu_decode_refuses(const TransformOptions& options);
/// The transform options of a dataset's bound options, checked together;
/// throws ConfigError for inconsistent values.
TransformOptions checked_transforms(const TransformOptions& options);

/// A deterministic generator: draws depend only on the seed.
class Draws {
 public:
  explicit Draws(uint64_t seed) : rng_(seed) {}
  double uniform(double lo, double hi) { return lo + (hi - lo) * rng_.uniform(); }  ///< in [lo, hi)
  double normal();                                                                  ///< standard normal (Box-Muller)
  bool chance(double p) { return p > 0 && uniform(0, 1) < p; }

 private:
  trainyard::SplitMix64 rng_;
};

/// Where a sample's pixels come from: the geometric draws of the transforms
/// for one seed, made once, the same for the CPU path (apply_transforms) and
/// the GPU path (gpu_decode.h), in the order apply_transforms draws them.
struct Geometry {
  cv::Size resized;  ///< the size load_size or resize_short gives; the full size without either
  cv::Rect crop;     ///< the part of the `resized` image taken (all of it for crop: none)
  cv::Size out;      ///< the sample's size: crop_size for random_resized, else crop's size
  bool hflip = false, vflip = false;
};
/// Draws the geometry of an image of `full` size: the crop's draws, then the
/// flips. A center or random crop larger than the (resized) image is a
/// BadRecord. Rotations, translations and colour draws follow on `draws`.
Geometry draw_geometry(cv::Size full, const TransformOptions& options, Draws& draws);

/// The rotation and translation that follow the flips, as a 2x3 affine
/// matrix on an image of `size`; nothing when the options have neither. Drawn
/// after draw_geometry, in this order (angle, then x, then y).
std::optional<cv::Mat> draw_affine(cv::Size size, const TransformOptions& options, Draws& draws);

/// The sample's whole geometry for `seed` as one affine map: a point (x, y)
/// of the original image of `full` size to the sample's, both in pixel-edge
/// coordinates (trainyard/fields.h: pixel (i, j) spans [j, j + 1) x [i, i + 1)):
/// the resize, the crop (and a random_resized crop's resize), the flips, then
/// the rotation and translation, as apply_transforms moves the pixels.
/// It has two stages, as the pixels do: the crop stage (resize, crop, flips)
/// cuts away what lies outside the crop, then the motion (rotation and
/// translation) moves what is left and brings in a border.
struct SampleAffine {
  cv::Matx23d affine;                 ///< the whole map: motion * crop_stage
  cv::Matx23d crop_stage;             ///< resize, crop, flips
  std::optional<cv::Matx23d> motion;  ///< rotation and translation, when drawn
  cv::Size out;                       ///< the sample's size
};
SampleAffine sample_affine(cv::Size full, const TransformOptions& options, uint64_t seed);

/// Boxes (x1, y1, x2, y2 rows, original pixels) into a sample, stage by
/// stage: each box's four corners mapped through the crop stage, their
/// bounds clipped to the sample (the crop keeps nothing outside it), then
/// through the motion, clipped again. A box is dropped when less than
/// `min_visible` of its area mapped without clipping is left, or its width
/// or height is under `min_size` pixels: `kept` says which boxes stay, in order.
std::vector<std::array<double, 4>> transform_boxes(const std::vector<std::array<double, 4>>& boxes,
                                                   const SampleAffine& geometry, double min_visible, double min_size,
                                                   std::vector<size_t>& kept);

/// A segmentation mask (one 8- or 16-bit channel of class ids, its image's size)
/// given the geometry its image gets for the same seed: the same resize,
/// crop, flips, rotation and translation, sampled nearest-neighbour so that
/// no id is mixed with another, `ignore_value` where the rotation or
/// translation brings in pixels from outside the image, and nothing else (no
/// colour, no normalization, no reduced decode). Returns int64 {H, W}. A
/// mask that is not one 8- or 16-bit channel is a BadRecord.
at::Tensor apply_mask_transforms(const cv::Mat& mask, const TransformOptions& options, uint64_t seed,
                                 int64_t ignore_value);

/// Applies the transforms to an 8-bit image as OpenCV decoded it (HWC, BGR or
/// gray) and returns a tensor {C, H, W} in RGB order: uint8 pixels when
/// `options.output` is uint8 (mean and std are then the host's to apply),
/// else float values in [0, 1] normalized by mean and std.
///
/// `reduction` > 1: `image` was decoded at 1/reduction of `full` (its size in
/// the file); every random draw is made on the full size, so the sample's
/// geometry does not depend on the decode scale.
at::Tensor apply_transforms(const cv::Mat& image, const TransformOptions& options, uint64_t seed, cv::Size full = {},
                            int reduction = 1);

/// The largest JPEG decode reduction (8, 4, 2, or 1 for none) that still
/// gives the crop at least its output resolution for this seed and an image
/// of `full` size: the region a random_resized crop takes, or the whole image
/// for load_size. 1 for every other crop, or when rotations or translations
/// follow (they sample the image outside the crop).
int decode_reduction(cv::Size full, const TransformOptions& options, uint64_t seed);

/// The part of an image of `full` size that the transforms read for this
/// seed: a random_resized crop's region, a center crop's rectangle, else
/// the whole image. A JPEG decoder may leave everything outside it undecoded.
cv::Rect decode_region(cv::Size full, const TransformOptions& options, uint64_t seed);

}  // namespace image_datasets
