// OpenCV transforms: correct on known inputs, deterministic per seed.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <opencv2/core.hpp>
#include <set>

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

}  // namespace
}  // namespace image_datasets
