// OpenCV transforms: correct on known inputs, deterministic per seed.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <fstream>
#include <opencv2/core.hpp>
#include <set>

#include <trainyard/error.h>

#include "support/support.h"
#include "transforms.h"

namespace image_datasets {
namespace {

namespace test = trainyard::test;

// A gray image whose pixel (r, c) is r * cols + c.
cv::Mat ramp(int rows, int cols) {
  cv::Mat m(rows, cols, CV_8UC1);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) m.at<uint8_t>(r, c) = uint8_t(r * cols + c);
  return m;
}

at::Tensor pixels(const at::Tensor& t) { return t.mul(255).round().to(at::kLong); }

TEST(Transforms, NoTransformGivesValuesInZeroOne) {
  at::Tensor t = apply_transforms(ramp(3, 4), TransformOptions{}, 1);
  ASSERT_EQ(t.sizes(), (at::IntArrayRef{1, 3, 4}));
  EXPECT_EQ(pixels(t)[0][2][3].item<int64_t>(), 11);
}

TEST(Transforms, HorizontalAndVerticalFlipFlip) {
  TransformOptions o;
  o.hflip = 1.0;
  at::Tensor t = pixels(apply_transforms(ramp(2, 3), o, 5));
  EXPECT_EQ(t[0][0][0].item<int64_t>(), 2);
  EXPECT_EQ(t[0][1][2].item<int64_t>(), 3);
  o.hflip = 0;
  o.vflip = 1.0;
  t = pixels(apply_transforms(ramp(2, 3), o, 5));
  EXPECT_EQ(t[0][0][0].item<int64_t>(), 3);
}

TEST(Transforms, CenterCropHasTheRightSizeAndOffset) {
  TransformOptions o;
  o.crop = "center";
  o.crop_size = {2, 2};
  at::Tensor t = pixels(apply_transforms(ramp(6, 6), o, 0));
  ASSERT_EQ(t.sizes(), (at::IntArrayRef{1, 2, 2}));
  EXPECT_EQ(t[0][0][0].item<int64_t>(), 2 * 6 + 2);  // rows 2-3, cols 2-3
  EXPECT_EQ(t[0][1][1].item<int64_t>(), 3 * 6 + 3);
}

TEST(Transforms, RandomCropIsInsideDeterministicPerSeedAndVaries) {
  TransformOptions o;
  o.crop = "random";
  o.crop_size = {3, 3};
  std::set<int64_t> corners;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    at::Tensor a = pixels(apply_transforms(ramp(8, 8), o, seed));
    EXPECT_TRUE(a.equal(pixels(apply_transforms(ramp(8, 8), o, seed))));
    int64_t corner = a[0][0][0].item<int64_t>();
    EXPECT_LE(corner / 8, 5);
    EXPECT_LE(corner % 8, 5);
    EXPECT_EQ(a[0][2][2].item<int64_t>(), corner + 2 * 8 + 2);  // a contiguous 3x3 window
    corners.insert(corner);
  }
  EXPECT_GT(corners.size(), 10u);  // 36 possible offsets
}

TEST(Transforms, RandomResizedCropHasTheCropSize) {
  TransformOptions o;
  o.crop = "random_resized";
  o.crop_size = {5, 7};
  o.scale = {0.3, 1.0};
  EXPECT_EQ(apply_transforms(ramp(20, 20), o, 3).sizes(), (at::IntArrayRef{1, 5, 7}));
}

TEST(Transforms, NormalizationGivesTheRightMean) {
  TransformOptions o;
  o.mean = {0.5};
  o.std = {0.25};
  cv::Mat constant(4, 4, CV_8UC1, cv::Scalar(204));  // 0.8
  at::Tensor t = apply_transforms(constant, o, 0);
  EXPECT_NEAR(t.mean().item<double>(), (0.8 - 0.5) / 0.25, 1e-5);
}

TEST(Transforms, ColorImagesBecomeRgbAndGrayOnRequest) {
  cv::Mat bgr(1, 1, CV_8UC3, cv::Scalar(10, 20, 30));  // B, G, R
  at::Tensor t = pixels(apply_transforms(bgr, TransformOptions{}, 0));
  EXPECT_EQ(t[0][0][0].item<int64_t>(), 30);  // R first
  EXPECT_EQ(t[2][0][0].item<int64_t>(), 10);
  TransformOptions gray;
  gray.color = "gray";
  EXPECT_EQ(apply_transforms(bgr, gray, 0).size(0), 1);
  TransformOptions rgb;
  rgb.color = "rgb";
  EXPECT_EQ(apply_transforms(ramp(2, 2), rgb, 0).size(0), 3);
}

TEST(Transforms, TheCallersImageIsLeftAsItWas) {
  cv::Mat bgr(4, 5, CV_8UC3, cv::Scalar(10, 20, 30));
  TransformOptions o;
  o.hflip = 1.0;
  o.brightness = 0.5;
  const at::Tensor first = apply_transforms(bgr, o, 3);
  EXPECT_EQ(bgr.at<cv::Vec3b>(0, 0), cv::Vec3b(10, 20, 30));
  EXPECT_TRUE(first.equal(apply_transforms(bgr, o, 3))) << "the same image gives the same tensor again";
}

TEST(Transforms, FullAugmentationIsDeterministicPerSeed) {
  TransformOptions o;
  o.color = "rgb";
  o.load_size = {16, 16};
  o.crop = "random_resized";
  o.crop_size = {12, 12};
  o.hflip = 0.5;
  o.rotate_degrees = 10;
  o.translate = 0.1;
  o.brightness = o.contrast = o.saturation = 0.4;
  o.lighting = 0.1;
  o.mean = {0.5, 0.5, 0.5};
  o.std = {0.2, 0.2, 0.2};
  cv::Mat image = ramp(10, 10);
  at::Tensor a = apply_transforms(image, o, 42), b = apply_transforms(image, o, 42), c = apply_transforms(image, o, 43);
  EXPECT_TRUE(a.equal(b));
  EXPECT_FALSE(a.equal(c));
  EXPECT_EQ(a.sizes(), (at::IntArrayRef{3, 12, 12}));
}

// Segmentation masks follow their image. Blocks of 16x16 pixels in 5 classes;
// in the photograph each class has a colour that no mix of the others makes
// (every colour is a corner of their convex hull), so a pixel of the
// transformed photograph that shows a class's colour exactly, with its 3x3
// neighbours, was resampled from that class alone: its mask must say so.
constexpr int kClasses = 5;
const cv::Vec3b kRgb[kClasses] = {{250, 0, 0}, {0, 250, 0}, {0, 0, 250}, {250, 250, 0}, {0, 250, 250}};

int block_class(int r, int c) { return (r / 16 + 2 * (c / 16)) % kClasses; }

TEST(MaskTransforms, OverAThousandSeedsMasksHoldOnlySourceClassesOrIgnoreAndFollowTheImage) {
  const int rows = 64, cols = 96;
  cv::Mat bgr(rows, cols, CV_8UC3), mask(rows, cols, CV_8UC1);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const cv::Vec3b rgb = kRgb[block_class(r, c)];
      bgr.at<cv::Vec3b>(r, c) = {rgb[2], rgb[1], rgb[0]};
      mask.at<uint8_t>(r, c) = static_cast<uint8_t>(block_class(r, c));
    }
  TransformOptions o;
  o.output = "uint8";
  o.load_size = {72, 108};
  o.crop = "random_resized";
  o.crop_size = {40, 40};
  o.scale = {0.3, 1.0};
  o.hflip = o.vflip = 0.5;
  o.rotate_degrees = 30;
  o.translate = 0.2;
  o.brightness = 0.3;  // the photograph's colours change; the mask is never jittered
  int64_t checked = 0, total = 0, ignored = 0;
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    const at::Tensor ids = apply_mask_transforms(mask, o, seed, 255);
    ASSERT_EQ(ids.scalar_type(), at::kLong);
    ASSERT_EQ(ids.sizes(), (at::IntArrayRef{40, 40})) << seed;
    // Only source classes and the ignore value.
    const at::Tensor valid = ids.lt(kClasses).logical_or(ids.eq(255));
    ASSERT_TRUE(valid.all().item<bool>()) << "seed " << seed << ": a value that is neither a class nor 255";
    // The same geometry as the photograph (without the brightness draw, which follows the geometry's).
    TransformOptions geometry_only = o;
    geometry_only.brightness = 0;
    const at::Tensor image = apply_transforms(bgr, geometry_only, seed).to(at::kInt);  // {3, 40, 40} RGB
    const auto px = image.accessor<int, 3>();
    const auto id = ids.accessor<int64_t, 2>();
    for (int r = 1; r < 39; ++r)
      for (int c = 1; c < 39; ++c) {
        ++total;
        if (id[r][c] == 255) {
          ++ignored;
          continue;
        }
        int k = -1;
        for (int q = 0; q < kClasses && k < 0; ++q)
          if (px[0][r][c] == kRgb[q][0] && px[1][r][c] == kRgb[q][1] && px[2][r][c] == kRgb[q][2]) k = q;
        if (k < 0) continue;  // a boundary: the photograph mixes classes there
        bool uniform = true;
        for (int dr = -1; dr <= 1; ++dr)
          for (int dc = -1; dc <= 1; ++dc)
            for (int ch = 0; ch < 3; ++ch) uniform = uniform && px[ch][r + dr][c + dc] == px[ch][r][c];
        if (!uniform) continue;
        ++checked;
        ASSERT_EQ(id[r][c], k) << "seed " << seed << ", pixel (" << r << ", " << c << ")";
      }
  }
  // The check covered a good part of the pixels (the rest lie on class
  // boundaries, which resampling blends), and the rotations brought in ignored ones.
  EXPECT_GT(checked, total / 5) << checked << " of " << total;
  EXPECT_GT(ignored, 0);
}

TEST(MaskTransforms, WithoutRotationOrTranslationNothingIsIgnoredAndTheSeedDecides) {
  cv::Mat mask(32, 32, CV_8UC1);
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 32; ++c) mask.at<uint8_t>(r, c) = static_cast<uint8_t>(block_class(r, c));
  TransformOptions o;
  o.crop = "random";
  o.crop_size = {16, 16};
  o.hflip = 0.5;
  const at::Tensor a = apply_mask_transforms(mask, o, 7, 255), b = apply_mask_transforms(mask, o, 7, 255);
  EXPECT_TRUE(a.equal(b));
  EXPECT_FALSE(a.eq(255).any().item<bool>());
  // An unrotated crop is the source's pixels, exactly (flipped or not).
  Draws draws(7);
  const Geometry g = draw_geometry(mask.size(), o, draws);
  at::Tensor source = at::from_blob(mask.data, {32, 32}, at::kByte).to(at::kLong);
  source = source.narrow(0, g.crop.y, 16).narrow(1, g.crop.x, 16);
  if (g.hflip) source = source.flip({1});
  EXPECT_TRUE(a.equal(source));
  // The ignore value may exceed 255: rotations fill with it.
  o.rotate_degrees = 45;
  EXPECT_TRUE(apply_mask_transforms(mask, o, 3, 1000).eq(1000).any().item<bool>());
}

TEST(MaskTransforms, AMaskThatIsNotOneIntegerChannelIsABadRecord) {
  const cv::Mat colour(8, 8, CV_8UC3, cv::Scalar::all(1));
  try {
    apply_mask_transforms(colour, TransformOptions{}, 0, 255);
    FAIL() << "a 3-channel mask was taken";
  } catch (const trainyard::BadRecord& e) {
    EXPECT_NE(
        std::string(e.what()).find("a mask has one 8- or 16-bit channel of class ids (a grey PNG), this image has 3 "
                                   "channels"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace image_datasets

namespace image_datasets {
namespace {

namespace test = trainyard::test;

// ---- Boxes that follow the image (issue 51) ----

// Four kinds of geometry, each with every random draw it can have.
TransformOptions geometry_kind(int kind) {
  TransformOptions o;
  o.hflip = 0.5, o.vflip = 0.5;
  if (kind == 0)
    o.load_size = {96, 128}, o.crop = "random", o.crop_size = {64, 80}, o.rotate_degrees = 30, o.translate = 0.2;
  if (kind == 1) o.crop = "random_resized", o.crop_size = {48, 48}, o.scale = {0.2, 1.0}, o.rotate_degrees = 45;
  if (kind == 2) o.resize_short = 60, o.crop = "center", o.crop_size = {56, 56}, o.translate = 0.3;
  if (kind == 3) o.rotate_degrees = 90, o.translate = 0.1;
  return o;
}

// Where a box's pixels land: the mask of a filled box, moved as a mask
// moves, covers the pixels whose centres lie in the moved box (one pixel of
// rounding at each edge; a rotation's box also holds the rotated corners'
// empty triangles, so it is only checked to contain them).
TEST(BoxGeometry, ABoxFollowsThePixelsItCovers) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const int kind = static_cast<int>(seed % 4);
    const TransformOptions o = geometry_kind(kind);
    const cv::Size full(90 + static_cast<int>(seed * 7 % 60), 80 + static_cast<int>(seed * 13 % 50));
    const int x1 = 10 + static_cast<int>(seed % 20), y1 = 8 + static_cast<int>(seed * 3 % 20);
    const int x2 = x1 + 25 + static_cast<int>(seed % 15), y2 = y1 + 30 + static_cast<int>(seed % 11);
    cv::Mat mask(full, CV_8UC1, cv::Scalar(0));
    mask(cv::Rect(x1, y1, x2 - x1, y2 - y1)).setTo(1);
    const at::Tensor moved = apply_mask_transforms(mask, o, seed, 255);
    const SampleAffine geometry = sample_affine(full, o, seed);
    ASSERT_EQ(moved.size(0), geometry.out.height);
    ASSERT_EQ(moved.size(1), geometry.out.width);
    std::vector<size_t> kept;
    const auto boxes = transform_boxes({{double(x1), double(y1), double(x2), double(y2)}}, geometry, 0, 0, kept);
    ASSERT_EQ(boxes.size(), 1u);
    const at::Tensor on = moved.eq(1).nonzero();
    const bool rotated = o.rotate_degrees > 0;
    if (on.size(0) == 0) {
      // Moved out of the sample: the box is (nearly) empty too, unless
      // rotated (a rotated box's bounds may keep a corner the box left).
      if (!rotated) {
        EXPECT_LT((boxes[0][2] - boxes[0][0]) * (boxes[0][3] - boxes[0][1]), 3.0) << "seed " << seed;
      }
      continue;
    }
    const double top = on.select(1, 0).min().item<int64_t>(), bottom = on.select(1, 0).max().item<int64_t>() + 1;
    const double left = on.select(1, 1).min().item<int64_t>(), right = on.select(1, 1).max().item<int64_t>() + 1;
    // Nearest sampling rounds each resize and the motion by up to half a pixel.
    const double slack = rotated ? 2.0 : 1.5;
    // The pixels are inside the box (to the rounding of nearest sampling) ...
    EXPECT_GE(left, boxes[0][0] - slack) << "seed " << seed;
    EXPECT_GE(top, boxes[0][1] - slack) << "seed " << seed;
    EXPECT_LE(right, boxes[0][2] + slack) << "seed " << seed;
    EXPECT_LE(bottom, boxes[0][3] + slack) << "seed " << seed;
    // ... and, without a rotation, fill it.
    if (!rotated) {
      EXPECT_NEAR(left, boxes[0][0], slack) << "seed " << seed;
      EXPECT_NEAR(top, boxes[0][1], slack) << "seed " << seed;
      EXPECT_NEAR(right, boxes[0][2], slack) << "seed " << seed;
      EXPECT_NEAR(bottom, boxes[0][3], slack) << "seed " << seed;
    }
  }
}

TEST(BoxGeometry, ACutBoxIsDroppedByItsVisibleShareAndSize) {
  const cv::Matx23d shift(1, 0, -50, 0, 1, 0);  // the left 50 columns cut away
  const SampleAffine crop{shift, shift, std::nullopt, cv::Size(100, 100)};
  std::vector<size_t> kept;
  const auto boxes =
      transform_boxes({{40, 0, 60, 10}, {45, 0, 55, 10}, {60, 0, 60.5, 10}, {10, 0, 20, 10}}, crop, 0.5, 1, kept);
  // Half of the first and of the second are left; the third is too narrow, the fourth gone.
  ASSERT_EQ(kept, (std::vector<size_t>{0, 1}));
  EXPECT_DOUBLE_EQ(boxes[0][0], 0);
  EXPECT_DOUBLE_EQ(boxes[0][2], 10);
  EXPECT_DOUBLE_EQ(boxes[1][2], 5);
}

// 1,000 seeds of crop, flips, rotation and translation: the boxes equal
// torchvision v2's functional ops (resize, crop, flips, affine on
// tv_tensors.BoundingBoxes, then clamped) given the same drawn parameters,
// within 1e-3 px; the masks of the same seeds hold only their source labels
// and the ignore value.
TEST(BoxGeometry, ThousandSeedsAgreeWithTorchvisionV2) {
  const std::string dir = test::temp_dir("boxes-vs-torchvision");
  std::ofstream cases(dir + "/cases.jsonl");
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    const TransformOptions o = geometry_kind(static_cast<int>(seed % 4));
    const cv::Size full(70 + static_cast<int>(seed * 37 % 150), 64 + static_cast<int>(seed * 53 % 120));
    Draws draws(seed);
    const Geometry g = draw_geometry(full, o, draws);
    const auto cv_affine = draw_affine(g.out, o, draws);
    std::vector<std::array<double, 4>> in;
    for (int k = 0; k < 3; ++k) {
      const double x = (seed * 11 + k * 29) % (full.width - 12), y = (seed * 17 + k * 31) % (full.height - 12);
      in.push_back({x + 0.25, y + 0.5, x + 6 + (seed + k) % 30 * 0.75, y + 7 + (seed * k) % 25 * 0.5});
      in.back()[2] = std::min<double>(in.back()[2], full.width),
      in.back()[3] = std::min<double>(in.back()[3], full.height);
    }
    const SampleAffine geometry = sample_affine(full, o, seed);
    std::vector<size_t> kept;
    const auto out = transform_boxes(in, geometry, 0, 0, kept);
    ASSERT_EQ(out.size(), in.size());
    const auto list = [](const std::vector<std::array<double, 4>>& b) {
      std::string s = "[";
      for (size_t k = 0; k < b.size(); ++k) {
        char row[160];
        std::snprintf(row, sizeof row, "%s[%.17g, %.17g, %.17g, %.17g]", k ? ", " : "", b[k][0], b[k][1], b[k][2],
                      b[k][3]);
        s += row;
      }
      return s + "]";
    };
    std::string affine = "null";
    if (cv_affine) {
      const cv::Matx23d a(*cv_affine);
      char text[300];
      std::snprintf(text, sizeof text, "[%.17g, %.17g, %.17g, %.17g, %.17g, %.17g]", a(0, 0), a(0, 1), a(0, 2), a(1, 0),
                    a(1, 1), a(1, 2));
      affine = text;
    }
    cases << "{\"seed\": " << seed << ", \"full\": [" << full.height << ", " << full.width << "], \"resized\": ["
          << g.resized.height << ", " << g.resized.width << "], \"crop\": [" << g.crop.y << ", " << g.crop.x << ", "
          << g.crop.height << ", " << g.crop.width << "], \"out\": [" << g.out.height << ", " << g.out.width
          << "], \"hflip\": " << g.hflip << ", \"vflip\": " << g.vflip << ", \"cv_affine\": " << affine
          << ", \"boxes\": " << list(in) << ", \"ours\": " << list(out) << "}\n";

    // The mask of the same seed: labels 0-4 in, only those and 255 out.
    cv::Mat labels(full, CV_8UC1);
    for (int r = 0; r < full.height; ++r)
      for (int c = 0; c < full.width; ++c) labels.at<uint8_t>(r, c) = static_cast<uint8_t>((r / 7 + c / 5 + seed) % 5);
    const at::Tensor moved = apply_mask_transforms(labels, o, seed, 255);
    const at::Tensor values = std::get<0>(at::_unique(moved));
    for (int64_t i = 0; i < values.numel(); ++i) {
      const int64_t v = values[i].item<int64_t>();
      EXPECT_TRUE(v <= 4 || v == 255) << "seed " << seed << " holds " << v;
    }
  }
  cases.close();
  const auto r = test::run_command(test::python() + " " + test::source_dir() +
                                   "/tests/plugins/boxes_vs_torchvision.py " + dir + "/cases.jsonl");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(test::contains(r.out, "1000 cases")) << r.out;
}

}  // namespace
}  // namespace image_datasets
