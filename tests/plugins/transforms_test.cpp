// OpenCV transforms: correct on known inputs, deterministic per seed.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <opencv2/core.hpp>
#include <set>

#include <trainyard/error.h>

#include "transforms.h"

namespace image_datasets {
namespace {

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
