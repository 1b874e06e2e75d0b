// JPEG decode at the scale the crop needs: the header is read right, the
// reduced decode takes the same region as the full one, and it is used only
// where the crop still gets its output resolution.
#include <gtest/gtest.h>

#include <cmath>

#include <ATen/ATen.h>
#include <trainyard/error.h>
#include <trainyard/image_codec.h>
#include <opencv2/core.hpp>

#include "image_dataset.h"
#include "jpeg_decode.h"

namespace image_datasets {
namespace {

// A colour photograph stand-in with structure at every scale: gradients
// plus stripes, so a crop of another region would differ visibly.
cv::Mat pattern(int rows, int cols) {
  cv::Mat m(rows, cols, CV_8UC3);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      m.at<cv::Vec3b>(r, c) = cv::Vec3b(uint8_t(255 * r / rows), uint8_t(255 * c / cols),
                                        uint8_t(128 + 100 * std::sin(c / 23.0) * std::cos(r / 31.0)));
  return m;
}

std::string jpeg(const cv::Mat& m, int quality = 92) { return trainyard::image_codec::encode_jpeg(m, quality); }

// An 8-bit grey BMP (a 256-level palette, rows bottom-up), as image editors write one.
std::string grey_bmp(const cv::Mat& m) {
  const uint32_t stride = (uint32_t(m.cols) + 3) / 4 * 4, pixels = stride * uint32_t(m.rows), offset = 14 + 40 + 1024;
  std::string b = "BM";
  const auto u32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) b += char(v >> (8 * i));
  };
  const auto u16 = [&](uint16_t v) { b += char(v), b += char(v >> 8); };
  u32(offset + pixels), u32(0), u32(offset);
  u32(40), u32(uint32_t(m.cols)), u32(uint32_t(m.rows)), u16(1), u16(8), u32(0), u32(pixels), u32(2835), u32(2835),
      u32(256), u32(0);
  for (int i = 0; i < 256; ++i) b += std::string{char(i), char(i), char(i), '\0'};
  for (int r = m.rows - 1; r >= 0; --r)
    b += std::string(m.ptr<char>(r), size_t(m.cols)) + std::string(stride - uint32_t(m.cols), '\0');
  return b;
}

// One JPEG as a dataset: the path every source (folder, LMDB) goes through.
class OneJpeg : public ImageDataset {
 public:
  OneJpeg(std::string bytes, TransformOptions t) : ImageDataset(std::move(t)), bytes_(std::move(bytes)) {}
  int64_t size() const override { return 1; }

 protected:
  LoadedSample load(int64_t) const override {
    LoadedSample s;
    s.inputs.push_back(SourceImage{bytes_, {}, "photo.jpg", {}});
    s.label = at::scalar_tensor(0, at::kLong);
    return s;
  }

 private:
  std::string bytes_;
};

TransformOptions random_resized(int size, double min_scale) {
  TransformOptions t;
  t.crop = "random_resized";
  t.crop_size = {size, size};
  t.scale = {min_scale, 1.0};
  return t;
}

TEST(ImageDecode, TheJpegHeaderGivesSizeAndComponentsAndNothingForOtherFiles) {
  const std::string colour = jpeg(pattern(375, 500));
  auto h = read_jpeg_header(colour.data(), colour.size());
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->size, cv::Size(500, 375));
  EXPECT_EQ(h->components, 3);
  cv::Mat grey;
  cv::extractChannel(pattern(40, 30), grey, 0);
  const std::string grey_jpeg = jpeg(grey);
  h = read_jpeg_header(grey_jpeg.data(), grey_jpeg.size());
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->size, cv::Size(30, 40));
  EXPECT_EQ(h->components, 1);
  const std::string png = trainyard::image_codec::encode_png(grey);
  EXPECT_FALSE(read_jpeg_header(png.data(), png.size()).has_value());
  EXPECT_FALSE(read_jpeg_header(colour.data(), 20).has_value()) << "cut before the frame header";
  EXPECT_FALSE(read_jpeg_header("", 0).has_value());
}

TEST(ImageDecode, ReductionIsTheLargestThatStillGivesTheCropItsResolution) {
  // Crops of at least 90% of a 1000x800 image: 1/4 gives >= 225 pixels a side.
  EXPECT_EQ(decode_reduction({1000, 800}, random_resized(224, 0.9), 1), 2);
  EXPECT_EQ(decode_reduction({1000, 800}, random_resized(100, 0.9), 1), 4);
  EXPECT_EQ(decode_reduction({1000, 800}, random_resized(64, 0.9), 1), 8);
  EXPECT_EQ(decode_reduction({300, 300}, random_resized(224, 0.9), 1), 1);
  TransformOptions resize;
  resize.load_size = {100, 120};
  EXPECT_EQ(decode_reduction({500, 400}, resize, 1), 4);  // 125x100 >= 120x100
  TransformOptions center;
  center.crop = "center";
  center.crop_size = {10, 10};
  EXPECT_EQ(decode_reduction({500, 400}, center, 1), 1) << "a center crop keeps pixels 1:1";
  TransformOptions rotated = random_resized(32, 0.9);
  rotated.rotate_degrees = 10;
  EXPECT_EQ(decode_reduction({500, 400}, rotated, 1), 1) << "a rotation samples outside the crop";
}

TEST(ImageDecode, AReducedDecodeTakesTheSameRegionAsTheFullOneForEverySeed) {
  const cv::Mat original = pattern(768, 1024);
  const std::string bytes = jpeg(original);
  const TransformOptions t = random_resized(64, 0.2);
  OneJpeg dataset(bytes, t);
  const cv::Mat full = decode_image(bytes.data(), bytes.size(), "photo.jpg");
  int reduced_seeds = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const at::Tensor fast = dataset.get_seeded(0, seed).input;
    ASSERT_EQ(fast.sizes(), (at::IntArrayRef{3, 64, 64}));
    EXPECT_TRUE(fast.equal(dataset.get_seeded(0, seed).input)) << "deterministic per seed";
    const at::Tensor exact = apply_transforms(full, t, seed);
    // Scaled IDCT, area resampling and the region rounded to the reduced
    // grid differ by a few levels; another region differs by far more.
    EXPECT_LT((fast - exact).abs().mean().item<double>(), 0.03) << "seed " << seed;
    const at::Tensor elsewhere = apply_transforms(full, t, seed + 100);
    EXPECT_GT((fast - elsewhere).abs().mean().item<double>(), 0.06) << "seed " << seed;
    reduced_seeds += decode_reduction(full.size(), t, seed) > 1;
  }
  EXPECT_GE(reduced_seeds, 15) << "most crops of a 1024x768 photo at 64x64 need a fraction of its pixels";
}

TEST(ImageDecode, ADamagedJpegIsABadRecordNamingTheFileAtAnyScale) {
  const std::string bytes = jpeg(pattern(400, 400));
  for (double min_scale : {0.9, 0.08}) {
    OneJpeg dataset(bytes.substr(0, 200), random_resized(32, min_scale));
    try {
      dataset.get_seeded(0, 3);
      ADD_FAILURE() << "a JPEG cut after 200 bytes decoded";
    } catch (const trainyard::BadRecord& e) {
      EXPECT_NE(std::string(e.what()).find("photo.jpg"), std::string::npos) << e.what();
    }
  }
}

// A header that claims more pixels than kMaxImagePixels is a bad record
// before any frame is allocated, for a center crop too (a 65500x65500 JPEG
// asked for a 12.9 GB frame and ended the run as a component crash).
TEST(ImageDecode, OnlyThePhotographFormatsReachADecoder) {
  // A Radiance HDR (OpenCV's imdecode, which trainyard once used, decoded it
  // through a temporary file) or an OpenEXR header named .jpg is refused
  // before any codec sees it; the formats trainyard reads still decode.
  for (const std::string& bytes :
       {std::string("#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 2 +X 2\n") + std::string(16, '\x80'),
        std::string("\x76\x2f\x31\x01\x02\x00\x00\x00", 8) + std::string(64, '\0')}) {
    try {
      decode_image(bytes.data(), bytes.size(), "odd.jpg");
      ADD_FAILURE() << "decoded: " << bytes.substr(0, 4);
    } catch (const trainyard::BadRecord& e) {
      EXPECT_NE(std::string(e.what()).find("odd.jpg: not an image trainyard decodes (expected JPEG, PNG, BMP, TIFF, "
                                           "WebP or PNM; the file starts with '"),
                std::string::npos)
          << e.what();
    }
  }
  const cv::Mat gray(4, 4, CV_8UC1, cv::Scalar(7));
  const std::string png = trainyard::image_codec::encode_png(gray), bmp = grey_bmp(gray);
  for (const auto* encoded : {&png, &bmp})
    EXPECT_EQ(decode_image(encoded->data(), encoded->size(), "ok").at<uchar>(2, 2), 7);
}

TEST(ImageDecode, AHeaderClaimingMoreThanThePixelLimitIsABadRecordBeforeDecoding) {
  std::string bomb = jpeg(pattern(64, 64));
  const auto sof = bomb.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  bomb[sof + 5] = bomb[sof + 7] = char(0xff), bomb[sof + 6] = bomb[sof + 8] = char(0xdc);  // 65500x65500
  std::string png_bomb = trainyard::image_codec::encode_png(pattern(8, 8));
  png_bomb[16] = png_bomb[20] = 0, png_bomb[17] = png_bomb[21] = 1;  // IHDR: 65544x65544 (its CRC no longer matters)
  TransformOptions center;
  center.crop = "center";
  center.crop_size = {32, 32};
  for (const auto& [bytes, claim] : {std::pair{bomb, std::string("65500x65500 pixels (4290250000)")},
                                     std::pair{png_bomb, std::string("65544x65544 pixels (4296015936)")}}) {
    OneJpeg dataset(bytes, center);
    try {
      dataset.get_seeded(0, 0);
      ADD_FAILURE() << "decoded";
    } catch (const trainyard::BadRecord& e) {
      EXPECT_NE(std::string(e.what()).find("photo.jpg: its header claims " + claim +
                                           ", expected at most 178956970 "
                                           "(Pillow's decompression-bomb limit)"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(ImageDecode, ARegionDecodeGivesTheWholeDecodesPixelsInsideTheRegion) {
  const std::string bytes = jpeg(pattern(768, 1024));  // 4:2:0, as most photographs
  const std::vector<cv::Rect> regions = {
      {300, 200, 240, 180}, {0, 0, 100, 90}, {900, 650, 124, 118}, {17, 333, 1007, 101}, {0, 0, 1024, 768}};
  for (int reduction : {1, 2, 4, 8}) {
    const cv::Mat whole = *decode_jpeg(bytes.data(), bytes.size(), reduction, "photo.jpg");
    for (const cv::Rect& region : regions) {
      const cv::Mat part = *decode_jpeg(bytes.data(), bytes.size(), reduction, "photo.jpg", region);
      ASSERT_EQ(part.size(), whole.size()) << "the reduced image keeps its size";
      const cv::Rect inside = cv::Rect(region.x / reduction, region.y / reduction,
                                       (region.x + region.width + reduction - 1) / reduction - region.x / reduction,
                                       (region.y + region.height + reduction - 1) / reduction - region.y / reduction) &
                              cv::Rect(0, 0, whole.cols, whole.rows);
      cv::Mat difference;
      cv::absdiff(part(inside), whole(inside), difference);
      double most = 0;
      cv::minMaxLoc(difference.reshape(1), nullptr, &most);
      EXPECT_EQ(most, 0) << "1/" << reduction << " region " << region;
    }
  }
}

}  // namespace
}  // namespace image_datasets
