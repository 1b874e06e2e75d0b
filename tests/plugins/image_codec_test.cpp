// trainyard/image_codec.h (the SDK helpers' image codecs, which replaced
// OpenCV's imgcodecs): every format and variant decodes to the pixels Pillow
// wrote (tests/plugins/image_codec_cases.py), in OpenCV's IMREAD_UNCHANGED
// layout; damaged files are one Error naming what is wrong, with nothing on
// stderr; our PNG and JPEG encoders round-trip and Pillow reads them.
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <sstream>

#include <trainyard/error.h>
#include <trainyard/image_codec.h>
#include <trainyard/labeled_files.h>
#include <opencv2/core.hpp>

#include "image_dataset.h"
#include "support/support.h"
#include "tar.h"

namespace trainyard::image_codec {
namespace {

std::string reference_cases() {
  static const std::string dir = [] {
    const std::string d = test::temp_dir("cases");
    const auto r =
        test::run_command(test::python() + " " + test::source_dir() + "/tests/plugins/image_codec_cases.py " + d);
    if (r.exit_code != 0) ADD_FAILURE() << "image_codec_cases.py failed: " << r.err;
    return d;
  }();
  return dir;
}

// The Error decode throws for `bytes`, with stderr captured: "" if it decoded.
std::string decode_error(const std::string& bytes, std::string* printed = nullptr) {
  testing::internal::CaptureStderr();
  std::string message;
  try {
    decode(bytes.data(), bytes.size());
  } catch (const Error& e) {
    message = e.what();
  }
  const std::string err = testing::internal::GetCapturedStderr();
  if (printed) *printed += err;
  return message;
}

void put_be32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = char(v >> (24 - 8 * i));
}
void put_le32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = char(v >> (8 * i));
}

TEST(ImageCodec, EveryFormatAndVariantDecodesToThePixelsPillowWrote) {
  const std::string dir = reference_cases();
  std::istringstream cases(test::read_file(dir + "/cases.txt"));
  std::string name, file;
  int rows, cols, channels, sample, exact, count = 0;
  while (cases >> name >> file >> rows >> cols >> channels >> sample >> exact) {
    SCOPED_TRACE(name);
    ++count;
    const std::string bytes = test::read_file(dir + "/" + file), raw = test::read_file(dir + "/" + name + ".raw");
    cv::Mat m;
    ASSERT_NO_THROW(m = decode(bytes.data(), bytes.size()));
    ASSERT_EQ(m.rows, rows);
    ASSERT_EQ(m.cols, cols);
    ASSERT_EQ(m.channels(), channels) << "channels as stored (IMREAD_UNCHANGED)";
    ASSERT_EQ(int(m.elemSize1()), sample) << "16-bit samples stay 16-bit";
    const cv::Mat expected(rows, cols, m.type(), const_cast<char*>(raw.data()));
    ASSERT_EQ(raw.size(), expected.total() * expected.elemSize());
    cv::Mat difference;
    cv::absdiff(m, expected, difference);
    double most = 0;
    cv::minMaxLoc(difference.reshape(1), nullptr, &most);
    EXPECT_LE(most, exact ? 0 : 1) << file;
  }
  EXPECT_GE(count, 40) << "the reference script wrote every case";
}

// What predict and the loader take for an image's size without decoding it.
TEST(ImageCodec, EveryJpegAndPngHeaderDeclaresTheSizeItDecodesToAndOtherFormatsNone) {
  const std::string dir = reference_cases();
  std::istringstream cases(test::read_file(dir + "/cases.txt"));
  std::string name, file;
  int rows, cols, channels, sample, exact, headers = 0;
  while (cases >> name >> file >> rows >> cols >> channels >> sample >> exact) {
    SCOPED_TRACE(file);
    const std::string bytes = test::read_file(dir + "/" + file);
    const Format format = sniff(bytes.data(), bytes.size());
    const auto h = read_header(bytes.data(), bytes.size());
    if (format != Format::jpeg && format != Format::png) {
      EXPECT_FALSE(h.has_value());
      continue;
    }
    ASSERT_TRUE(h.has_value());
    ++headers;
    EXPECT_EQ(h->format, format);
    EXPECT_EQ(h->width, uint64_t(cols));
    EXPECT_EQ(h->height, uint64_t(rows));
    if (format == Format::jpeg) {
      EXPECT_EQ(h->components, channels);  // the cases: grey and colour
    }
    EXPECT_FALSE(read_header(bytes.data(), 20).has_value()) << "cut before the frame header or IHDR ends";
  }
  EXPECT_GE(headers, 10);
  // A PNG's sides may declare up to 2^32 - 1 each: read as declared, for the caller's bound.
  std::string huge = encode_png(cv::Mat(3, 2, CV_8UC1, cv::Scalar(7)));
  put_be32(huge, 16, 0xFFFFFFFFu), put_be32(huge, 20, 0xFFFFFFFEu);
  const auto h = read_header(huge.data(), huge.size());
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->width, 0xFFFFFFFFull);
  EXPECT_EQ(h->height, 0xFFFFFFFEull);
  put_be32(huge, 16, 0);
  EXPECT_FALSE(read_header(huge.data(), huge.size()).has_value()) << "an empty frame";
  EXPECT_FALSE(read_header("", 0).has_value());
}

TEST(ImageCodec, DamagedFilesAreOneErrorNamingWhatIsWrongAndPrintNothing) {
  const std::string dir = reference_cases();
  std::string printed;
  const auto fails_with = [&](const std::string& bytes, const std::string& expected) {
    const std::string message = decode_error(bytes, &printed);
    EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "', got '" << message << "'";
  };
  const std::string png = test::read_file(dir + "/png_rgb.png");
  fails_with(png.substr(0, png.size() / 2), "truncated PNG (" + std::to_string(png.size() / 2) + " bytes)");
  std::string crc = png;
  crc[20] ^= 1;  // IHDR's height, its CRC now wrong
  fails_with(crc, "PNG: IHDR: CRC error");
  // A PNG claiming 65544x65544 pixels (with a correct CRC): refused before a frame is allocated.
  std::string bomb = png;
  put_be32(bomb, 16, 65544), put_be32(bomb, 20, 65544);
  put_be32(bomb, 29, uint32_t(crc32(0, reinterpret_cast<const Bytef*>(bomb.data() + 12), 17)));
  fails_with(bomb, "PNG: its header claims 65544x65544 pixels (4296015936), expected at most 178956970");

  // A BMP whose header claims more rows than its bytes hold.
  std::string bmp = test::read_file(dir + "/bmp_rgb24.bmp");
  put_le32(bmp, 22, 1000);
  fails_with(bmp, "truncated BMP (" + std::to_string(bmp.size()) +
                      " bytes): its header claims 1000x17 at 24 bits a "
                      "pixel, 52000 bytes of pixels from offset 54");
  put_le32(bmp, 18, 100000), put_le32(bmp, 22, 100000);
  fails_with(bmp, "BMP: its header claims 100000x100000 pixels (10000000000), expected at most 178956970");
  std::string rle = test::read_file(dir + "/bmp_gray8.bmp");
  rle[30] = 1;
  fails_with(rle, "BMP: RLE-compressed (BI_RLE8), which trainyard does not decode");
  fails_with(test::read_file(dir + "/bmp_gray8.bmp").substr(0, 40), "truncated BMP (40 bytes");

  fails_with("P5 100000 90000 255\n" + std::string(64, '\0'), "PNM: its header claims 90000x100000 pixels");
  fails_with("P6 4 4 255\n" + std::string(47, '\0'), "truncated PNM (58 bytes): its header claims 4x4, 48 bytes");
  fails_with("P5 4 4 70000\n", "PNM: bad header: maximum value 70000, expected 1 to 65535");
  fails_with("P2 4 x\n", "PNM: bad header: expected the height (a decimal number) at byte 5");

  // A WebP whose image chunk claims more bytes than the file has, and one cut short.
  std::string webp = test::read_file(dir + "/webp_lossless.webp");
  put_le32(webp, 16, 0x7fffff00);
  fails_with(webp, "WebP: bad header: a damaged bitstream or chunk");
  webp = test::read_file(dir + "/webp_lossless.webp");
  fails_with(webp.substr(0, webp.size() - 10), "truncated WebP (" + std::to_string(webp.size() - 10) +
                                                   " bytes, its RIFF header says " + std::to_string(webp.size()) + ")");

  const std::string tiff = test::read_file(dir + "/tiff_rgb_tiff_lzw.tif");
  fails_with(tiff.substr(0, 6), "TIFF: cannot read its header");
  std::string lzw = tiff;
  for (size_t i = 8; i < 40; ++i) lzw[i] = char(0xff);  // the compressed strip (Pillow writes it before the directory)
  fails_with(lzw, "TIFF: cannot decode the image: ");

  const std::string jpeg = test::read_file(dir + "/jpeg_rgb.jpg");
  fails_with(jpeg.substr(0, jpeg.size() - 40), "truncated JPEG");
  fails_with(jpeg.substr(0, 30), "truncated JPEG (30 bytes)");
  fails_with("", "empty (0 bytes)");
  fails_with("#?RADIANCE\n", "not an image trainyard decodes (expected JPEG, PNG, BMP, TIFF, WebP or PNM)");
  EXPECT_EQ(printed, "") << "a decoder printed on stderr";

  // The image datasets turn it into their bad-record line, naming the file.
  try {
    image_datasets::decode_image(rle.data(), rle.size(), "shelf/a.bmp");
    ADD_FAILURE() << "an RLE BMP decoded";
  } catch (const trainyard::BadRecord& e) {
    EXPECT_NE(std::string(e.what()).find("shelf/a.bmp: cannot decode image: BMP: RLE-compressed"), std::string::npos)
        << e.what();
  }
}

cv::Mat noise(int rows, int cols, int type) {
  cv::Mat m(rows, cols, type);
  cv::randu(m, 0, CV_MAT_DEPTH(type) == CV_16U ? 65536 : 256);
  return m;
}

TEST(ImageCodec, PngRoundTripsExactlyAndPillowReadsIt) {
  const std::string dir = test::temp_dir("png");
  for (int type : {CV_8UC1, CV_8UC3, CV_8UC4, CV_16UC1, CV_16UC3}) {
    const cv::Mat m = noise(9, 11, type);
    for (int level : {0, 9}) {
      const std::string png = encode_png(m, level);
      const cv::Mat back = decode(png.data(), png.size());
      ASSERT_EQ(back.type(), m.type());
      EXPECT_EQ(cv::norm(back, m, cv::NORM_INF), 0) << "type " << type << " level " << level;
    }
  }
  // Pillow reads a colour PNG of ours as the RGB we meant.
  const cv::Mat bgr = noise(9, 11, CV_8UC3);
  test::write_file(dir + "/ours.png", encode_png(bgr));
  const auto r = test::run_command(test::python() +
                                   " -c \"from PIL import Image; import sys; "
                                   "i = Image.open('" +
                                   dir +
                                   "/ours.png'); assert i.mode == 'RGB', i.mode; "
                                   "open('" +
                                   dir + "/rgb.raw', 'wb').write(i.tobytes())\"");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string rgb = test::read_file(dir + "/rgb.raw");
  ASSERT_EQ(rgb.size(), bgr.total() * 3);
  for (size_t i = 0; i < bgr.total(); ++i)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(uint8_t(rgb[3 * i + c]), bgr.data[3 * i + 2 - c]) << "pixel " << i;
}

TEST(ImageCodec, JpegRoundTripsWithinItsQualityAndRefusesWhatItCannotEncode) {
  cv::Mat smooth(48, 64, CV_8UC3);
  for (int r = 0; r < smooth.rows; ++r)
    for (int c = 0; c < smooth.cols; ++c) smooth.at<cv::Vec3b>(r, c) = cv::Vec3b(uint8_t(4 * c), uint8_t(5 * r), 90);
  const std::string fine = encode_jpeg(smooth, 95), coarse = encode_jpeg(smooth, 20);
  EXPECT_LT(coarse.size(), fine.size()) << "the quality reaches the encoder";
  const cv::Mat back = decode(fine.data(), fine.size());
  ASSERT_EQ(back.type(), CV_8UC3);
  EXPECT_LT(cv::norm(back, smooth, cv::NORM_L1) / double(smooth.total() * 3), 2.0);
  cv::Mat grey;
  cv::extractChannel(smooth, grey, 0);
  const std::string g = encode_jpeg(grey);
  EXPECT_EQ(decode(g.data(), g.size()).type(), CV_8UC1);
  const std::string alpha = encode_jpeg(noise(8, 8, CV_8UC4));  // alpha dropped, as OpenCV's encoder did
  EXPECT_EQ(decode(alpha.data(), alpha.size()).type(), CV_8UC3);
  EXPECT_THROW(encode_jpeg(noise(8, 8, CV_16UC1)), Error);
  EXPECT_THROW(encode_png(cv::Mat()), Error);
  EXPECT_THROW(encode_png(cv::Mat(4, 4, CV_32FC1)), Error);
}

// One table of formats and extensions; each source looks for its own formats
// by name (image folders: JPEG, PNG, BMP, PNM; WebDataset members: JPEG, PNG, WebP).
TEST(ImageCodec, TheFormatTableGivesEachExtensionItsFormatAndEachSourceItsFiles) {
  EXPECT_EQ(format_for_extension(".JPG"), Format::jpeg);
  EXPECT_EQ(format_for_extension("jpeg"), Format::jpeg);
  EXPECT_EQ(format_for_extension(".tif"), Format::tiff);
  EXPECT_EQ(format_for_extension(".gif"), Format::unknown);
  EXPECT_EQ(format_for_extension(""), Format::unknown);
  EXPECT_EQ(extension_of(Format::png), "png");
  EXPECT_EQ(image_extensions({Format::jpeg, Format::webp}), (std::vector<std::string>{"jpg", "jpeg", "webp"}));
  for (const auto& f : formats()) EXPECT_STREQ(format_name(f.format), f.name);
  EXPECT_EQ(trainyard::image_file_extensions(), (std::vector<std::string>{"jpg", "jpeg", "png", "bmp", "pgm", "ppm"}));
  EXPECT_TRUE(trainyard::is_image_file("dir/a.PPM"));
  EXPECT_FALSE(trainyard::is_image_file("dir/a.webp"));
  EXPECT_TRUE(image_datasets::tar::is_image_extension("webp"));
  EXPECT_FALSE(image_datasets::tar::is_image_extension("bmp"));
  EXPECT_EQ(image_datasets::tar::image_member_names(), "KEY.jpg, KEY.jpeg, KEY.png or KEY.webp");
}

}  // namespace
}  // namespace trainyard::image_codec
