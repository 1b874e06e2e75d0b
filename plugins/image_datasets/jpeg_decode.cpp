#include "jpeg_decode.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>

#include <jpeglib.h>
#ifndef JCS_EXTENSIONS
#include <opencv2/imgproc.hpp>
#endif
#include <trainyard/error.h>

namespace image_datasets {
namespace {

// libjpeg reports a fatal error through error_exit, which must not return:
// it jumps back to decode_rows. Warnings (corrupt but decodable data) are
// counted and not printed, as OpenCV and PIL accept such files.
struct ErrorManager {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_error(j_common_ptr info) {
  auto* errors = reinterpret_cast<ErrorManager*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}
void on_message(j_common_ptr) {}

enum class Outcome { decoded, not_taken, damaged };

// Holds nothing with a destructor between setjmp and a longjmp; `out` is the
// caller's, allocated here once the output size is known.
Outcome decode_rows(const unsigned char* data, size_t size, int reduction, cv::Rect region, cv::Mat& out,
                    ErrorManager& errors) {
  jpeg_decompress_struct info;
  info.err = jpeg_std_error(&errors.base);
  errors.base.error_exit = on_error;
  errors.base.output_message = on_message;
  errors.message[0] = '\0';
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&info);
    return Outcome::damaged;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  if (info.num_components != 1 && info.num_components != 3) {
    jpeg_destroy_decompress(&info);
    return Outcome::not_taken;
  }
  const bool grey = info.num_components == 1;
#ifdef JCS_EXTENSIONS
  info.out_color_space = grey ? JCS_GRAYSCALE : JCS_EXT_BGR;
#else
  info.out_color_space = grey ? JCS_GRAYSCALE : JCS_RGB;  // swapped below
#endif
  info.scale_num = 1;
  info.scale_denom = static_cast<unsigned>(reduction);
  jpeg_start_decompress(&info);
  const int rows = static_cast<int>(info.output_height), cols = static_cast<int>(info.output_width);
  out.create(rows, cols, grey ? CV_8UC1 : CV_8UC3);
  // The window to decode, in output pixels: the region at this scale, widened.
  int top = 0, bottom = rows;
  JDIMENSION left = 0, width = info.output_width;
  if (!region.empty()) {
    top = std::max(0, region.y / reduction - kRegionMargin);
    bottom = std::min(rows, (region.y + region.height + reduction - 1) / reduction + kRegionMargin);
    const int x0 = std::max(0, region.x / reduction - kRegionMargin);
    const int x1 = std::min(cols, (region.x + region.width + reduction - 1) / reduction + kRegionMargin);
    if (x0 > 0 || x1 < cols) {
      left = static_cast<JDIMENSION>(x0), width = static_cast<JDIMENSION>(std::max(1, x1 - x0));
      jpeg_crop_scanline(&info, &left, &width);  // moves left to an iMCU boundary, widens to match
    }
    if (top > 0) jpeg_skip_scanlines(&info, static_cast<JDIMENSION>(top));
  }
  const size_t offset = static_cast<size_t>(left) * static_cast<size_t>(out.channels());
  while (static_cast<int>(info.output_scanline) < bottom) {
    JSAMPROW row = out.ptr(static_cast<int>(info.output_scanline)) + offset;
    jpeg_read_scanlines(&info, &row, 1);
  }
  if (bottom < rows)
    jpeg_abort_decompress(&info);  // the rows below are not needed
  else
    jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
#ifndef JCS_EXTENSIONS
  if (!grey) cv::cvtColor(out, out, cv::COLOR_RGB2BGR);
#endif
  return Outcome::decoded;
}

}  // namespace

std::optional<cv::Mat> decode_jpeg(const void* data, size_t size, int reduction, const std::string& what,
                                   cv::Rect region) {
  cv::Mat out;
  ErrorManager errors;
  switch (decode_rows(static_cast<const unsigned char*>(data), size, reduction, region, out, errors)) {
    case Outcome::decoded:
      return out;
    case Outcome::not_taken:
      return std::nullopt;
    case Outcome::damaged:
      break;
  }
  throw trainyard::BadRecord(what + ": damaged JPEG (libjpeg: " + errors.message + ")");
}

}  // namespace image_datasets
