#pragma once
/// Image decoding and encoding through the codec libraries themselves
/// (libjpeg-turbo, libpng, libwebp, libtiff; BMP and PNM by hand), into
/// and out of OpenCV's cv::Mat. Needs OpenCV's core only: a plugin that
/// includes this header links opencv_core besides Trainyard::sdk_helpers.
///
/// Example:
///   cv::Mat image = trainyard::image_codec::decode(bytes.data(), bytes.size());
///   std::string png = trainyard::image_codec::encode_png(image);
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace trainyard::image_codec {

/// Damaged or unsupported image data, or an image an encoder cannot take.
/// The message names the format and what was wrong ("truncated PNG (812
/// bytes): ...", "BMP: its header claims ..."); callers prefix the file.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The most pixels a header may claim (Pillow's decompression-bomb limit),
/// checked before any frame is allocated.
inline constexpr uint64_t kMaxPixels = 178'956'970;

enum class Format { unknown, jpeg, png, bmp, tiff, webp, pnm };

/// One image format: its name and the file extensions that name it.
struct FormatInfo {
  Format format;
  const char* name;                     ///< "JPEG", "PNG", ...
  const char* media_type;               ///< "image/jpeg", ...: a data URI's or a page's type
  std::vector<std::string> extensions;  ///< lower case, no dot, the usual one first: {"jpg", "jpeg"}
};

/// Every format decode() reads, in Format's order: the one table of image
/// formats and their file extensions (PNM is looked for as .pgm and .ppm).
/// Sources pick the formats they look for by name (image folders, CSV lists
/// and predict: is_image_file in labeled_files.h; WebDataset members:
/// JPEG, PNG and WebP); decode() goes by content, whatever the name says.
///
/// Example:
///   trainyard::image_codec::format_for_extension(".JPG")  // Format::jpeg
const std::vector<FormatInfo>& formats();
/// The format a file extension names ("jpg", ".JPG", "jpeg": any case, with
/// or without the dot); Format::unknown for any other.
Format format_for_extension(std::string ext);
/// The usual extension of `format` (its first: "jpg", "png"); empty for unknown.
std::string extension_of(Format format);
/// The extensions of `among`, in the table's order: {jpeg, png} gives
/// {"jpg", "jpeg", "png"}.
std::vector<std::string> image_extensions(std::initializer_list<Format> among);

/// The format by the data's first bytes.
Format sniff(const void* data, size_t size);
/// "JPEG", "PNG", ..., "unknown".
const char* format_name(Format format);

/// What a JPEG's frame header or a PNG's IHDR chunk declares, read without
/// decoding: enough to know an image's size, or to refuse a frame too large
/// (check width * height against kMaxPixels) before a decoder allocates it.
struct Header {
  Format format = Format::unknown;
  uint64_t width = 0, height = 0;  ///< as declared: a PNG's may each be up to 2^32 - 1
  int components = 0;              ///< a JPEG's: 1 grey, 3 YCbCr, 4 CMYK/YCCK; 0 for a PNG
};
/// The header of a JPEG (baseline or progressive) or a PNG; nothing for
/// other formats, a header cut short, or one declaring an empty frame.
///
/// Example:
///   if (auto h = trainyard::image_codec::read_header(bytes.data(), bytes.size())) use(h->width, h->height);
std::optional<Header> read_header(const void* data, size_t size);

/// Decodes a JPEG, PNG, BMP, TIFF (its first page), WebP or PNM (P1-P6)
/// with the channels as stored, like OpenCV's IMREAD_UNCHANGED: grey
/// (CV_8UC1 or CV_16UC1), BGR (3 channels) or BGRA (4; a PNG of grey plus
/// alpha, a palette or colour PNG with a transparent entry, a 32-bit BMP
/// with an alpha mask, a TIFF with an extra sample, a WebP with alpha).
/// 16-bit samples stay 16-bit for PNG, PNM and TIFF (grey or RGB);
/// everything else is 8-bit. Throws Error for anything else.
cv::Mat decode(const void* data, size_t size);

/// A PNG of an 8- or 16-bit grey, BGR or BGRA image; `compression` 0-9 (zlib's levels).
std::string encode_png(const cv::Mat& image, int compression = 3);
/// A baseline JPEG (4:2:0) of an 8-bit grey, BGR or BGRA (alpha dropped) image; `quality` 1-100.
std::string encode_jpeg(const cv::Mat& image, int quality = 95);

}  // namespace trainyard::image_codec
