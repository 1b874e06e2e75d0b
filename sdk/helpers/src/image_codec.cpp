// Image codecs through the format libraries, without OpenCV's imgcodecs
// (whose Debian build links GDAL, GDCM and OpenEXR: about 130 libraries).
//
// libpng and libjpeg report fatal errors through a callback that must not
// return: it longjmps back to a setjmp in a function (the *_run below) that
// reaches every object through one state pointer and holds nothing with a
// destructor of its own, so no C++ object is skipped; the caller then turns
// the recorded message into an Error. Warnings are dropped (a decoder never
// prints); a JPEG that ends early is an error here, not libjpeg's warning.
#include "trainyard/image_codec.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <csetjmp>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>
#include <tiffio.h>
#include <webp/decode.h>

namespace trainyard::image_codec {

namespace {

using u8 = unsigned char;

template <class F>
struct Finally {
  F f;
  ~Finally() { f(); }
};
template <class F>
Finally(F) -> Finally<F>;

std::string num(uint64_t v) { return std::to_string(v); }
uint16_t le16(const u8* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t le32(const u8* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

// "" when the claimed size is acceptable, else the reason.
std::string pixel_problem(const char* format, uint64_t rows, uint64_t cols) {
  if (rows == 0 || cols == 0)
    return std::string(format) + ": its header claims an empty image (" + num(rows) + "x" + num(cols) + " pixels)";
  if (rows > kMaxPixels || cols > kMaxPixels || rows * cols > kMaxPixels)
    return std::string(format) + ": its header claims " + num(rows) + "x" + num(cols) + " pixels (" +
           (rows <= UINT32_MAX && cols <= UINT32_MAX ? num(rows * cols) : std::string("more than 2^64")) +
           "), expected at most " + num(kMaxPixels) + " (Pillow's decompression-bomb limit)";
  return "";
}
void check_pixels(const char* format, uint64_t rows, uint64_t cols) {
  if (auto problem = pixel_problem(format, rows, cols); !problem.empty()) throw Error(problem);
}

// BGR <-> RGB in place, for the libraries that give or take only RGB order.
template <class T>
void swap_red_blue(cv::Mat& m) {
  if (m.channels() < 3) return;
  for (int r = 0; r < m.rows; ++r) {
    T* p = m.ptr<T>(r);
    for (int c = 0; c < m.cols; ++c, p += m.channels()) std::swap(p[0], p[2]);
  }
}

// ---------------------------------------------------------------- PNG ----

struct PngState {
  const u8* data = nullptr;
  size_t size = 0, at = 0;
  std::string message;
  png_structp png = nullptr;
  png_infop info = nullptr;
  cv::Mat image;
  std::vector<png_bytep> rows;
  // Encoding
  const cv::Mat* source = nullptr;
  int compression = 3;
  std::string out;
};

void png_fail(png_structp png, png_const_charp message) {
  auto* s = static_cast<PngState*>(png_get_error_ptr(png));
  if (s->message.empty()) s->message = std::string("PNG: ") + message;
  png_longjmp(png, 1);
}
void png_quiet(png_structp, png_const_charp) {}

void png_read_bytes(png_structp png, png_bytep out, size_t n) {
  auto* s = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > s->size - s->at) {
    s->message = "truncated PNG (" + num(s->size) + " bytes): the data ends inside a chunk";
    png_error(png, "truncated");
  }
  std::memcpy(out, s->data + s->at, n);
  s->at += n;
}

bool png_read_run(PngState* s) {
  if (setjmp(png_jmpbuf(s->png))) return false;
  png_set_read_fn(s->png, s, png_read_bytes);
  png_set_user_limits(s->png, 0x7fffffff, 0x7fffffff);  // the pixel limit below says it better
  png_read_info(s->png, s->info);
  png_uint_32 width = 0, height = 0;
  int depth = 0, color = 0;
  png_get_IHDR(s->png, s->info, &width, &height, &depth, &color, nullptr, nullptr, nullptr);
  s->message = pixel_problem("PNG", height, width);
  if (!s->message.empty()) return false;
  // OpenCV's IMREAD_UNCHANGED layout: grey stays grey (a transparent level
  // is dropped), grey+alpha becomes BGRA, a transparent palette or colour
  // entry gives an alpha channel.
  const bool transparent = png_get_valid(s->png, s->info, PNG_INFO_tRNS) != 0;
  int channels = 4;
  if (color == PNG_COLOR_TYPE_GRAY) {
    channels = 1;
    if (depth < 8) png_set_expand_gray_1_2_4_to_8(s->png);
  } else if (color == PNG_COLOR_TYPE_GRAY_ALPHA) {
    png_set_gray_to_rgb(s->png);
  } else if (color == PNG_COLOR_TYPE_PALETTE || color == PNG_COLOR_TYPE_RGB) {
    channels = transparent ? 4 : 3;
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(s->png);
    if (transparent) png_set_tRNS_to_alpha(s->png);
  }
  if (channels >= 3) png_set_bgr(s->png);
  if (depth == 16) png_set_swap(s->png);  // to the host's little-endian order
  png_set_interlace_handling(s->png);
  png_read_update_info(s->png, s->info);
  const size_t sample = depth == 16 ? 2 : 1;
  if (png_get_rowbytes(s->png, s->info) != size_t(width) * channels * sample) {
    s->message = "PNG: an unexpected row layout (colour type " + num(color) + ", " + num(depth) + " bits)";
    return false;
  }
  s->image.create(int(height), int(width), CV_MAKETYPE(depth == 16 ? CV_16U : CV_8U, channels));
  s->rows.resize(height);
  for (png_uint_32 r = 0; r < height; ++r) s->rows[r] = s->image.ptr(int(r));
  png_read_image(s->png, s->rows.data());
  png_read_end(s->png, nullptr);
  return true;
}

cv::Mat decode_png(const u8* data, size_t size) {
  PngState s;
  s.data = data, s.size = size;
  s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, png_fail, png_quiet);
  if (!s.png) throw Error("PNG: cannot create a decoder (out of memory)");
  Finally release{[&] { png_destroy_read_struct(&s.png, s.info ? &s.info : nullptr, nullptr); }};
  s.info = png_create_info_struct(s.png);
  if (!s.info) throw Error("PNG: cannot create a decoder (out of memory)");
  if (!png_read_run(&s)) throw Error(s.message.empty() ? "PNG: cannot decode" : s.message);
  return s.image;
}

void png_write_bytes(png_structp png, png_bytep data, size_t n) {
  static_cast<PngState*>(png_get_io_ptr(png))->out.append(reinterpret_cast<const char*>(data), n);
}
void png_flush(png_structp) {}

bool png_write_run(PngState* s) {
  if (setjmp(png_jmpbuf(s->png))) return false;
  const cv::Mat& m = *s->source;
  png_set_write_fn(s->png, s, png_write_bytes, png_flush);
  png_set_compression_level(s->png, s->compression);
  const int color = m.channels() == 1   ? PNG_COLOR_TYPE_GRAY
                    : m.channels() == 3 ? PNG_COLOR_TYPE_RGB
                                        : PNG_COLOR_TYPE_RGBA;
  png_set_IHDR(s->png, s->info, png_uint_32(m.cols), png_uint_32(m.rows), m.depth() == CV_16U ? 16 : 8, color,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(s->png, s->info);
  if (m.channels() >= 3) png_set_bgr(s->png);
  if (m.depth() == CV_16U) png_set_swap(s->png);
  for (int r = 0; r < m.rows; ++r) png_write_row(s->png, const_cast<png_bytep>(m.ptr(r)));
  png_write_end(s->png, s->info);
  return true;
}

// --------------------------------------------------------------- JPEG ----

struct JpegErrors {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_fail(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  c->err->format_message(c, e->message);
  std::longjmp(e->jump, 1);
}
void jpeg_note(j_common_ptr c, int level) {
  auto* e = reinterpret_cast<JpegErrors*>(c->err);
  // libjpeg pads a cut file with grey and only warns: an error here.
  if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) {
    std::snprintf(e->message, sizeof e->message, "the data ends before the image does");
    std::longjmp(e->jump, 1);
  }
}
void jpeg_errors(JpegErrors& e) {
  jpeg_std_error(&e.base);
  e.base.error_exit = jpeg_fail;
  e.base.emit_message = jpeg_note;
  e.message[0] = 0;
}

struct JpegDecoder {
  jpeg_decompress_struct info;
  JpegErrors errors;
  bool created = false;
  std::string problem;
  cv::Mat image;
  std::vector<u8> row;
};

bool jpeg_read_run(JpegDecoder* d, const u8* data, size_t size) {
  if (setjmp(d->errors.jump)) return false;
  jpeg_create_decompress(&d->info);
  d->created = true;
  jpeg_mem_src(&d->info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&d->info, TRUE);
  d->problem = pixel_problem("JPEG", d->info.image_height, d->info.image_width);
  if (!d->problem.empty()) return false;
  const bool cmyk = d->info.jpeg_color_space == JCS_CMYK || d->info.jpeg_color_space == JCS_YCCK;
  const bool grey = d->info.num_components == 1;
  d->info.out_color_space = cmyk ? JCS_CMYK : grey ? JCS_GRAYSCALE : JCS_EXT_BGR;
  jpeg_start_decompress(&d->info);
  d->image.create(int(d->info.output_height), int(d->info.output_width), grey ? CV_8UC1 : CV_8UC3);
  if (cmyk) d->row.resize(size_t(d->info.output_width) * 4);
  while (d->info.output_scanline < d->info.output_height) {
    const int r = int(d->info.output_scanline);
    JSAMPROW out = cmyk ? d->row.data() : d->image.ptr(r);
    jpeg_read_scanlines(&d->info, &out, 1);
    if (!cmyk) continue;
    // As stored (Adobe's inverted CMYK): each colour scaled by K, as OpenCV converted it.
    u8* bgr = d->image.ptr(r);
    for (JDIMENSION c = 0; c < d->info.output_width; ++c) {
      const int k = out[4 * c + 3];
      for (int i = 0; i < 3; ++i) bgr[3 * c + 2 - i] = u8(k - (((255 - out[4 * c + i]) * k) >> 8));
    }
  }
  jpeg_finish_decompress(&d->info);
  return true;
}

cv::Mat decode_jpeg(const u8* data, size_t size) {
  JpegDecoder d;
  d.info.err = &d.errors.base;
  jpeg_errors(d.errors);
  Finally release{[&] {
    if (d.created) jpeg_destroy_decompress(&d.info);
  }};
  if (!jpeg_read_run(&d, data, size)) {
    if (!d.problem.empty()) throw Error(d.problem);
    const bool cut = std::strcmp(d.errors.message, "the data ends before the image does") == 0;
    throw Error((cut ? "truncated JPEG (" + num(size) + " bytes): " : std::string("JPEG: ")) + d.errors.message);
  }
  return d.image;
}

struct JpegEncoder {
  jpeg_compress_struct info;
  JpegErrors errors;
  bool created = false;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
};

bool jpeg_write_run(JpegEncoder* e, const cv::Mat& m, int quality) {
  if (setjmp(e->errors.jump)) return false;
  jpeg_create_compress(&e->info);
  e->created = true;
  jpeg_mem_dest(&e->info, &e->buffer, &e->size);
  e->info.image_width = JDIMENSION(m.cols);
  e->info.image_height = JDIMENSION(m.rows);
  e->info.input_components = m.channels();
  e->info.in_color_space = m.channels() == 1 ? JCS_GRAYSCALE : m.channels() == 3 ? JCS_EXT_BGR : JCS_EXT_BGRX;
  jpeg_set_defaults(&e->info);
  jpeg_set_quality(&e->info, quality, TRUE);
  jpeg_start_compress(&e->info, TRUE);
  while (e->info.next_scanline < e->info.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(m.ptr(int(e->info.next_scanline)));
    jpeg_write_scanlines(&e->info, &row, 1);
  }
  jpeg_finish_compress(&e->info);
  return true;
}

// --------------------------------------------------------------- WebP ----

const char* webp_status(VP8StatusCode s) {
  switch (s) {
    case VP8_STATUS_OUT_OF_MEMORY:
      return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
      return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
      return "a damaged bitstream or chunk";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      return "an unsupported feature";
    case VP8_STATUS_NOT_ENOUGH_DATA:
      return "the data ends early";
    default:
      return "an unknown error";
  }
}

cv::Mat decode_webp(const u8* data, size_t size) {
  const uint64_t riff = uint64_t(le32(data + 4)) + 8;
  if (riff > size) throw Error("truncated WebP (" + num(size) + " bytes, its RIFF header says " + num(riff) + ")");
  WebPBitstreamFeatures f;
  const VP8StatusCode status = WebPGetFeatures(data, size, &f);
  if (status != VP8_STATUS_OK) throw Error(std::string("WebP: bad header: ") + webp_status(status));
  if (f.has_animation) throw Error("WebP: an animation, expected a still image");
  check_pixels("WebP", uint64_t(f.height), uint64_t(f.width));
  cv::Mat m(f.height, f.width, f.has_alpha ? CV_8UC4 : CV_8UC3);
  const size_t bytes = m.total() * m.elemSize();
  const uint8_t* ok = f.has_alpha ? WebPDecodeBGRAInto(data, size, m.data, bytes, int(m.step))
                                  : WebPDecodeBGRInto(data, size, m.data, bytes, int(m.step));
  if (!ok) throw Error("WebP: the image data is damaged or truncated (" + num(size) + " bytes)");
  return m;
}

// --------------------------------------------------------------- TIFF ----

struct TiffSource {
  const u8* data;
  uint64_t size, at;
  std::string message;
};

tmsize_t tiff_read(thandle_t h, void* out, tmsize_t n) {
  auto* s = static_cast<TiffSource*>(h);
  if (n <= 0 || s->at >= s->size) return 0;
  const uint64_t k = std::min<uint64_t>(uint64_t(n), s->size - s->at);
  std::memcpy(out, s->data + s->at, k);
  s->at += k;
  return tmsize_t(k);
}
tmsize_t tiff_write(thandle_t, void*, tmsize_t) { return 0; }
toff_t tiff_seek(thandle_t h, toff_t offset, int whence) {
  auto* s = static_cast<TiffSource*>(h);
  const uint64_t base = whence == SEEK_CUR ? s->at : whence == SEEK_END ? s->size : 0;
  s->at = base + offset;  // past the end: reads return nothing
  return s->at;
}
int tiff_close(thandle_t) { return 0; }
toff_t tiff_size(thandle_t h) { return static_cast<TiffSource*>(h)->size; }
int tiff_map(thandle_t, void**, toff_t*) { return 0; }
void tiff_unmap(thandle_t, void*, toff_t) {}
int tiff_error(TIFF*, void* user, const char* module, const char* format, va_list args) {
  auto* s = static_cast<TiffSource*>(user);
  if (s->message.empty()) {
    char text[512];
    std::vsnprintf(text, sizeof text, format, args);
    s->message = std::string(module ? module : "") + (module ? ": " : "") + text;
  }
  return 1;  // handled: nothing reaches libtiff's default handler (stderr)
}
int tiff_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

cv::Mat decode_tiff(const u8* data, size_t size) {
  TiffSource source{data, size, 0, {}};
  TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
  TIFFOpenOptionsSetErrorHandlerExtR(options, tiff_error, &source);
  TIFFOpenOptionsSetWarningHandlerExtR(options, tiff_warning, &source);
  TIFF* tif = TIFFClientOpenExt("memory", "rm", &source, tiff_read, tiff_write, tiff_seek, tiff_close, tiff_size,
                                tiff_map, tiff_unmap, options);
  TIFFOpenOptionsFree(options);
  const auto failed = [&](const std::string& what) {
    return Error("TIFF: " + what + (source.message.empty() ? "" : ": " + source.message) + " (" + num(size) +
                 " bytes)");
  };
  if (!tif) throw failed("cannot read its header");
  Finally release{[&] { TIFFClose(tif); }};
  uint32_t width = 0, height = 0;
  uint16_t samples = 1, bits = 1, photometric = PHOTOMETRIC_MINISBLACK, planar = PLANARCONFIG_CONTIG, extra_count = 0;
  uint16_t* extra = nullptr;
  if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width) || !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height))
    throw failed("bad header: no image width or length");
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &samples);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
  TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  TIFFGetFieldDefaulted(tif, TIFFTAG_EXTRASAMPLES, &extra_count, &extra);
  check_pixels("TIFF", height, width);
  // 16-bit grey or RGB(A) in strips keeps its samples (libtiff gives them in host order).
  if (bits == 16 && planar == PLANARCONFIG_CONTIG && !TIFFIsTiled(tif) &&
      ((photometric == PHOTOMETRIC_MINISBLACK && samples == 1) ||
       (photometric == PHOTOMETRIC_RGB && (samples == 3 || samples == 4)))) {
    cv::Mat m(int(height), int(width), CV_16UC(samples));
    if (uint64_t(TIFFScanlineSize64(tif)) != uint64_t(width) * samples * 2) throw failed("an unexpected row layout");
    for (uint32_t r = 0; r < height; ++r)
      if (TIFFReadScanline(tif, m.ptr(int(r)), r, 0) < 0) throw failed("cannot read row " + num(r));
    swap_red_blue<uint16_t>(m);
    return m;
  }
  // Anything else through libtiff's RGBA interface: 8 bits a sample, an
  // unassociated alpha premultiplied (as OpenCV's decode gave them).
  std::vector<uint32_t> raster(size_t(width) * height);
  if (!TIFFReadRGBAImageOriented(tif, width, height, raster.data(), ORIENTATION_TOPLEFT, 1))
    throw failed("cannot decode the image");
  const bool grey = (photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE) && samples == 1;
  const int channels = grey ? 1 : extra_count > 0 ? 4 : 3;
  cv::Mat m(int(height), int(width), CV_8UC(channels));
  for (uint32_t r = 0; r < height; ++r) {
    u8* out = m.ptr(int(r));
    const uint32_t* in = raster.data() + size_t(r) * width;
    for (uint32_t c = 0; c < width; ++c, out += channels) {
      const uint32_t v = in[c];
      if (grey) {
        out[0] = u8(TIFFGetR(v));
        continue;
      }
      out[0] = u8(TIFFGetB(v)), out[1] = u8(TIFFGetG(v)), out[2] = u8(TIFFGetR(v));
      if (channels == 4) out[3] = u8(TIFFGetA(v));
    }
  }
  return m;
}

// ---------------------------------------------------------------- BMP ----

// One channel of a BI_BITFIELDS (or 16/32-bit BI_RGB) pixel, to 8 bits by
// shifting, as OpenCV did (5 bits v become v << 3).
u8 field(uint32_t pixel, uint32_t mask) {
  if (mask == 0) return 0;
  const int shift = std::countr_zero(mask), width = std::popcount(mask);
  const uint32_t v = (pixel & mask) >> shift;
  return u8(width >= 8 ? v >> (width - 8) : v << (8 - width));
}

cv::Mat decode_bmp(const u8* p, size_t size) {
  if (size < 14 + 40)
    throw Error("truncated BMP (" + num(size) + " bytes, expected at least 54 for its file and info headers)");
  const uint32_t offset = le32(p + 10), header = le32(p + 14);
  if (header == 12)
    throw Error(
        "BMP: an OS/2 header (BITMAPCOREHEADER, 12 bytes), expected BITMAPINFOHEADER (40 bytes) or later; "
        "save it again as a Windows BMP");
  if (header < 40 || header > 124 || 14 + header > size)
    throw Error("BMP: bad header: its info header claims " + num(header) + " bytes, expected 40 to 124 within the " +
                num(size) + "-byte file");
  const int32_t width = int32_t(le32(p + 18)), height = int32_t(le32(p + 22));
  const uint16_t bpp = le16(p + 28);
  const uint32_t compression = le32(p + 30), colours = le32(p + 46);
  if (width <= 0 || height == 0)
    throw Error("BMP: bad header: width " + std::to_string(width) + ", height " + std::to_string(height) +
                ", expected a positive width and a non-zero height");
  const uint64_t rows = height < 0 ? uint64_t(-int64_t(height)) : uint64_t(height), cols = uint64_t(width);
  check_pixels("BMP", rows, cols);
  if (compression == 1 || compression == 2)
    throw Error(std::string("BMP: RLE-compressed (") + (compression == 1 ? "BI_RLE8" : "BI_RLE4") +
                "), which trainyard does not decode; expected BI_RGB or BI_BITFIELDS: save it uncompressed");
  if (compression != 0 && compression != 3 && compression != 6)
    throw Error("BMP: compression " + num(compression) +
                " (4 and 5 hold a JPEG or PNG), expected BI_RGB (0) or BI_BITFIELDS (3)");
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32)
    throw Error("BMP: " + num(bpp) + " bits a pixel, expected 1, 4, 8, 16, 24 or 32");
  const bool bitfields = compression == 3 || compression == 6;
  if (bitfields && bpp != 16 && bpp != 32)
    throw Error("BMP: BI_BITFIELDS with " + num(bpp) + " bits a pixel, expected 16 or 32");
  // Masks follow a 40-byte header, or sit inside a longer one, at the same place.
  const size_t mask_bytes = header == 40 ? (compression == 6 ? 16 : bitfields ? 12 : 0) : 0;
  if (14 + 40 + std::max<size_t>(mask_bytes, header > 40 ? header - 40 : 0) > size)
    throw Error("truncated BMP (" + num(size) + " bytes): it ends inside its colour masks");
  uint32_t masks[4] = {0, 0, 0, 0};  // red, green, blue, alpha
  if (bitfields) {
    for (int i = 0; i < 3; ++i) masks[i] = le32(p + 54 + 4 * i);
    if (compression == 6 || header >= 56) masks[3] = le32(p + 66);
  } else if (bpp == 16) {
    masks[0] = 0x7C00, masks[1] = 0x03E0, masks[2] = 0x001F;
  } else if (bpp == 32) {
    masks[0] = 0x00FF0000, masks[1] = 0x0000FF00, masks[2] = 0x000000FF;  // the fourth byte is padding
  }
  u8 palette[256][4] = {};
  bool grey = false;
  if (bpp <= 8) {
    const uint32_t entries = colours ? colours : 1u << bpp;
    if (entries > 256) throw Error("BMP: bad header: " + num(entries) + " palette colours, expected at most 256");
    const size_t at = 14 + header + mask_bytes;
    if (at + 4 * size_t(entries) > size)
      throw Error("truncated BMP (" + num(size) + " bytes): its " + num(entries) +
                  "-colour palette ends past the file");
    std::memcpy(palette, p + at, 4 * size_t(entries));
    grey = std::all_of(palette, palette + entries, [](const u8* e) { return e[0] == e[1] && e[1] == e[2]; });
  }
  const uint64_t stride = (cols * bpp + 31) / 32 * 4;
  if (offset > size || stride * rows > size - offset)
    throw Error("truncated BMP (" + num(size) + " bytes): its header claims " + num(rows) + "x" + num(cols) + " at " +
                num(bpp) + " bits a pixel, " + num(stride * rows) + " bytes of pixels from offset " + num(offset));
  const int channels = bpp <= 8 ? (grey ? 1 : 3) : (bpp == 32 && masks[3] != 0) ? 4 : 3;
  cv::Mat m(int(rows), int(cols), CV_8UC(channels));
  for (uint64_t y = 0; y < rows; ++y) {
    const u8* in = p + offset + stride * (height < 0 ? y : rows - 1 - y);
    u8* out = m.ptr(int(y));
    for (uint64_t x = 0; x < cols; ++x, out += channels) {
      if (bpp <= 8) {
        const unsigned index = bpp == 8   ? in[x]
                               : bpp == 4 ? (in[x / 2] >> (x % 2 ? 0 : 4)) & 15
                                          : (in[x / 8] >> (7 - x % 8)) & 1;
        const u8* colour = palette[index];
        if (grey)
          out[0] = colour[0];
        else
          out[0] = colour[0], out[1] = colour[1], out[2] = colour[2];
      } else if (bpp == 24) {
        out[0] = in[3 * x], out[1] = in[3 * x + 1], out[2] = in[3 * x + 2];
      } else {
        const uint32_t pixel = bpp == 16 ? le16(in + 2 * x) : le32(in + 4 * x);
        out[0] = field(pixel, masks[2]), out[1] = field(pixel, masks[1]), out[2] = field(pixel, masks[0]);
        if (channels == 4) out[3] = field(pixel, masks[3]);
      }
    }
  }
  return m;
}

// ---------------------------------------------------------------- PNM ----

struct PnmReader {
  const u8* p;
  size_t size, at;

  void skip_space() {
    while (at < size && (std::isspace(p[at]) || p[at] == '#')) {
      if (p[at] == '#')
        while (at < size && p[at] != '\n' && p[at] != '\r') ++at;
      else
        ++at;
    }
  }
  uint64_t number(const char* what) {
    skip_space();
    if (at >= size || !std::isdigit(p[at]))
      throw Error(std::string(at >= size ? "truncated PNM" : "PNM: bad header") + ": expected " + what +
                  " (a decimal number) at byte " + num(at));
    uint64_t v = 0;
    while (at < size && std::isdigit(p[at]) && v < (uint64_t(1) << 40)) v = v * 10 + (p[at++] - '0');
    return v;
  }
};

cv::Mat decode_pnm(const u8* data, size_t size) {
  const int kind = data[1] - '0';  // 1-6, by sniff()
  PnmReader in{data, size, 2};
  const uint64_t cols = in.number("the width"), rows = in.number("the height");
  const bool bitmap = kind == 1 || kind == 4;
  const uint64_t maxval = bitmap ? 1 : in.number("the maximum value");
  if (maxval < 1 || maxval > 65535)
    throw Error("PNM: bad header: maximum value " + num(maxval) + ", expected 1 to 65535");
  check_pixels("PNM", rows, cols);
  const int channels = kind == 3 || kind == 6 ? 3 : 1;
  const bool wide = maxval > 255;
  cv::Mat m(int(rows), int(cols), CV_MAKETYPE(wide ? CV_16U : CV_8U, channels));
  const uint64_t samples = rows * cols * channels;
  const auto truncated = [&](uint64_t needed) {
    return Error("truncated PNM (" + num(size) + " bytes): its header claims " + num(rows) + "x" + num(cols) + ", " +
                 num(needed) + " bytes of pixels from offset " + num(in.at));
  };
  // Sample i in file order (RGB) to OpenCV's (BGR). As OpenCV read them:
  // binary samples as stored, text ones up to the maximum and, in 8 bits,
  // scaled to 0-255.
  const auto store = [&](uint64_t i, uint64_t v) {
    const uint64_t pixel = i / channels, c = channels == 3 ? 2 - i % 3 : 0;
    if (wide)
      m.ptr<uint16_t>(int(pixel / cols))[(pixel % cols) * channels + c] = uint16_t(v);
    else
      m.ptr<u8>(int(pixel / cols))[(pixel % cols) * channels + c] = u8(v);
  };
  if (kind >= 4) {  // binary: one whitespace byte after the header
    ++in.at;
    if (kind == 4) {
      const uint64_t stride = (cols + 7) / 8;
      if (in.at > size || stride * rows > size - in.at) throw truncated(stride * rows);
      for (uint64_t r = 0; r < rows; ++r)
        for (uint64_t c = 0; c < cols; ++c)
          m.ptr<u8>(int(r))[c] = (data[in.at + r * stride + c / 8] >> (7 - c % 8)) & 1 ? 0 : 255;  // 1 is black
      return m;
    }
    const uint64_t bytes = samples * (wide ? 2 : 1);
    if (in.at > size || bytes > size - in.at) throw truncated(bytes);
    const u8* q = data + in.at;
    for (uint64_t i = 0; i < samples; ++i) store(i, wide ? (uint64_t(q[2 * i]) << 8) | q[2 * i + 1] : q[i]);
    return m;
  }
  for (uint64_t i = 0; i < samples; ++i) {
    if (kind == 1) {  // P1's digits need no space between them
      in.skip_space();
      if (in.at >= size)
        throw Error("truncated PNM (" + num(size) + " bytes): " + num(i) + " of " + num(samples) + " pixels");
      if (data[in.at] != '0' && data[in.at] != '1')
        throw Error("PNM: bad pixel at byte " + num(in.at) + ": expected 0 or 1");
      m.ptr<u8>(int(i / cols))[i % cols] = data[in.at++] == '1' ? 0 : 255;
      continue;
    }
    const uint64_t v = std::min(in.number("a pixel value"), maxval);
    store(i, wide ? v : v * 255 / maxval);
  }
  return m;
}

}  // namespace

Format sniff(const void* data, size_t size) {
  const auto* p = static_cast<const u8*>(data);
  const auto starts = [&](const char* magic, size_t n, size_t at = 0) {
    return size >= at + n && std::memcmp(p + at, magic, n) == 0;
  };
  if (starts("\xFF\xD8\xFF", 3)) return Format::jpeg;
  if (starts("\x89PNG\r\n\x1A\n", 8)) return Format::png;
  if (starts("BM", 2)) return Format::bmp;
  if (starts("II*\0", 4) || starts("MM\0*", 4)) return Format::tiff;
  if (starts("RIFF", 4) && starts("WEBP", 4, 8)) return Format::webp;
  if (size >= 2 && p[0] == 'P' && p[1] >= '1' && p[1] <= '6') return Format::pnm;
  return Format::unknown;
}

namespace {
// Markers after SOI (FF D8): FF xx, then a big-endian length that counts
// itself. The frame header (SOF0-SOF15 but DHT C4, JPG C8, DAC CC) holds
// precision, height, width and the component count.
std::optional<Header> jpeg_header(const u8* p, size_t size) {
  size_t at = 2;
  while (at + 4 <= size) {
    if (p[at] != 0xFF) return std::nullopt;
    const u8 marker = p[at + 1];
    if (marker == 0xFF) {  // a fill byte
      ++at;
      continue;
    }
    const size_t length = (size_t(p[at + 2]) << 8) | p[at + 3];
    const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame) {
      if (at + 10 > size || length < 8) return std::nullopt;
      Header h{Format::jpeg, (uint64_t(p[at + 7]) << 8) | p[at + 8], (uint64_t(p[at + 5]) << 8) | p[at + 6], p[at + 9]};
      if (h.width == 0 || h.height == 0) return std::nullopt;
      return h;
    }
    if (marker == 0xDA || marker == 0xD9 || length < 2) return std::nullopt;  // a scan or the end before a frame
    at += 2 + length;
  }
  return std::nullopt;
}

// IHDR is a PNG's first chunk: length, "IHDR", then the big-endian width and height.
std::optional<Header> png_header(const u8* p, size_t size) {
  if (size < 24 || std::memcmp(p + 12, "IHDR", 4) != 0) return std::nullopt;
  const auto be32 = [&](size_t at) {
    return (uint64_t(p[at]) << 24) | (uint64_t(p[at + 1]) << 16) | (uint64_t(p[at + 2]) << 8) | p[at + 3];
  };
  Header h{Format::png, be32(16), be32(20), 0};
  if (h.width == 0 || h.height == 0) return std::nullopt;
  return h;
}
}  // namespace

std::optional<Header> read_header(const void* data, size_t size) {
  const auto* p = static_cast<const u8*>(data);
  switch (sniff(data, size)) {
    case Format::jpeg:
      return jpeg_header(p, size);
    case Format::png:
      return png_header(p, size);
    default:
      return std::nullopt;
  }
}

const std::vector<FormatInfo>& formats() {
  static const std::vector<FormatInfo> table{
      {Format::jpeg, "JPEG", "image/jpeg", {"jpg", "jpeg"}},
      {Format::png, "PNG", "image/png", {"png"}},
      {Format::bmp, "BMP", "image/bmp", {"bmp"}},
      {Format::tiff, "TIFF", "image/tiff", {"tif", "tiff"}},
      {Format::webp, "WebP", "image/webp", {"webp"}},
      {Format::pnm, "PNM", "image/x-portable-anymap", {"pgm", "ppm"}},
  };
  return table;
}

Format format_for_extension(std::string ext) {
  if (!ext.empty() && ext.front() == '.') ext.erase(0, 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const auto& f : formats())
    if (std::find(f.extensions.begin(), f.extensions.end(), ext) != f.extensions.end()) return f.format;
  return Format::unknown;
}

std::string extension_of(Format format) {
  for (const auto& f : formats())
    if (f.format == format) return f.extensions.front();
  return "";
}

std::vector<std::string> image_extensions(std::initializer_list<Format> among) {
  std::vector<std::string> out;
  for (const auto& f : formats())
    if (std::find(among.begin(), among.end(), f.format) != among.end())
      out.insert(out.end(), f.extensions.begin(), f.extensions.end());
  return out;
}

const char* format_name(Format format) {
  for (const auto& f : formats())
    if (f.format == format) return f.name;
  return "unknown";
}

cv::Mat decode(const void* data, size_t size) {
  const auto* p = static_cast<const u8*>(data);
  if (size == 0) throw Error("empty (0 bytes), expected an image");
  switch (sniff(data, size)) {
    case Format::jpeg:
      return decode_jpeg(p, size);
    case Format::png:
      return decode_png(p, size);
    case Format::bmp:
      return decode_bmp(p, size);
    case Format::tiff:
      return decode_tiff(p, size);
    case Format::webp:
      return decode_webp(p, size);
    case Format::pnm:
      return decode_pnm(p, size);
    default:
      break;
  }
  throw Error("not an image trainyard decodes (expected JPEG, PNG, BMP, TIFF, WebP or PNM)");
}

std::string encode_png(const cv::Mat& image, int compression) {
  if (image.empty() || (image.depth() != CV_8U && image.depth() != CV_16U) ||
      (image.channels() != 1 && image.channels() != 3 && image.channels() != 4))
    throw Error("PNG encoder: expected an 8- or 16-bit image of 1, 3 or 4 channels, got " +
                (image.empty() ? std::string("an empty one") : "type " + num(uint64_t(image.type()))));
  PngState s;
  s.source = &image;
  s.compression = std::clamp(compression, 0, 9);
  s.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &s, png_fail, png_quiet);
  if (!s.png) throw Error("PNG: cannot create an encoder (out of memory)");
  Finally release{[&] { png_destroy_write_struct(&s.png, s.info ? &s.info : nullptr); }};
  s.info = png_create_info_struct(s.png);
  if (!s.info || !png_write_run(&s)) throw Error(s.message.empty() ? "PNG: cannot encode" : s.message);
  return std::move(s.out);
}

std::string encode_jpeg(const cv::Mat& image, int quality) {
  if (image.empty() || image.depth() != CV_8U ||
      (image.channels() != 1 && image.channels() != 3 && image.channels() != 4))
    throw Error("JPEG encoder: expected an 8-bit image of 1, 3 or 4 channels, got " +
                (image.empty() ? std::string("an empty one") : "type " + num(uint64_t(image.type()))));
  JpegEncoder e;
  e.info.err = &e.errors.base;
  jpeg_errors(e.errors);
  Finally release{[&] {
    if (e.created) jpeg_destroy_compress(&e.info);
    std::free(e.buffer);
  }};
  if (!jpeg_write_run(&e, image, std::clamp(quality, 1, 100))) throw Error(std::string("JPEG: ") + e.errors.message);
  return std::string(reinterpret_cast<const char*>(e.buffer), e.size);
}

}  // namespace trainyard::image_codec
