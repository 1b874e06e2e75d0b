#include "transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <ATen/ATen.h>
#include <trainyard/error.h>
#include <trainyard/image_geometry.h>
#include <opencv2/imgproc.hpp>

namespace image_datasets {

TransformOptions checked_transforms(const TransformOptions& options) {
  TransformOptions t = options;
  using trainyard::ConfigError;
  if (!t.load_size.empty() && t.load_size.size() != 2)
    throw ConfigError("load_size has " + std::to_string(t.load_size.size()) + " values", "expected [height, width]",
                      "");
  if (!t.load_size.empty() && t.resize_short > 0)
    throw ConfigError("load_size and resize_short are both set", "expected one way to resize first", "remove one");
  if (t.crop != "none" && t.crop_size.size() != 2)
    throw ConfigError("crop: " + t.crop + " needs crop_size", "expected crop_size: [height, width]", "");
  if (t.scale.size() != 2 || t.scale[0] > t.scale[1] || t.ratio.size() != 2 || t.ratio[0] > t.ratio[1])
    throw ConfigError("scale and ratio must be [low, high] ranges", "expected two values, low first", "");
  if (t.mean.size() != t.std.size())
    throw ConfigError("mean has " + std::to_string(t.mean.size()) + " values and std " + std::to_string(t.std.size()),
                      "expected one per channel in both", "");
  if (t.target == "mask" && t.mask_classes < 1)
    throw ConfigError("target: mask needs mask_classes", "expected mask_classes: N, the classes the masks hold", "");
  if (t.target == "mask" && t.ignore_index < t.mask_classes)
    throw ConfigError("ignore_index " + std::to_string(t.ignore_index) + " is one of the " +
                          std::to_string(t.mask_classes) + " mask classes",
                      "expected an ignore_index of mask_classes or more (255 by default)", "");
  if (t.target == "image" && t.mask_classes > 0)
    throw ConfigError("mask_classes without target: mask", "expected target: mask for masks", "");
  if (t.target == "boxes" && t.mask_classes > 0)
    throw ConfigError("mask_classes with target: boxes", "expected mask_classes with target: mask only",
                      "drop mask_classes");
  if (t.decode == "gpu")
    if (const auto why = gpu_decode_refuses(t))
      throw ConfigError(
          "decode: gpu with " + *why,
          "expected the transforms the GPU path applies: crop (any), crop_size, load_size or resize_short, hflip, "
          "vflip, color keep or rgb, output uint8",
          "use decode: cpu (or auto, which then decodes on the CPU) for these transforms");
  return t;
}

std::optional<std::string> gpu_decode_refuses(const TransformOptions& t) {
  std::string named;
  const auto name = [&](bool set, const char* option) {
    if (set) named += (named.empty() ? "" : ", ") + std::string(option);
  };
  name(t.rotate_degrees > 0, "rotate_degrees");
  name(t.translate > 0, "translate");
  name(t.brightness > 0, "brightness");
  name(t.contrast > 0, "contrast");
  name(t.saturation > 0, "saturation");
  name(t.lighting > 0, "lighting");
  name(t.color == "gray", "color: gray");
  if (t.output != "uint8") named += (named.empty() ? "output: " : ", output: ") + t.output;
  if (named.empty()) return std::nullopt;
  return named;
}

double Draws::normal() {
  double u1 = uniform(1e-12, 1.0), u2 = uniform(0.0, 1.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

namespace {

cv::Mat resize_to(const cv::Mat& m, int h, int w) {
  if (m.rows == h && m.cols == w) return m;
  cv::Mat out;
  cv::resize(m, out, cv::Size(w, h), 0, 0, (h < m.rows || w < m.cols) ? cv::INTER_AREA : cv::INTER_LINEAR);
  return out;
}

// The region a random_resized crop takes from an image of `full` size: a
// random area and aspect ratio; the whole image when ten tries find none
// that fits. The draws are the first apply_transforms makes.
cv::Rect random_resized_region(cv::Size full, const TransformOptions& t, Draws& draws) {
  const double area = static_cast<double>(full.height) * full.width;
  for (int attempt = 0; attempt < 10; ++attempt) {
    double target = area * draws.uniform(t.scale[0], t.scale[1]);
    double aspect = std::exp(draws.uniform(std::log(t.ratio[0]), std::log(t.ratio[1])));
    int w = static_cast<int>(std::round(std::sqrt(target * aspect)));
    int h = static_cast<int>(std::round(std::sqrt(target / aspect)));
    if (w > 0 && h > 0 && w <= full.width && h <= full.height) {
      int y = static_cast<int>(draws.uniform(0, full.height - h + 1));
      int x = static_cast<int>(draws.uniform(0, full.width - w + 1));
      return {x, y, w, h};
    }
  }
  return {0, 0, full.width, full.height};
}

// `region` of the full-size image, in an image decoded at 1/reduction.
cv::Rect reduced(cv::Rect region, int reduction, const cv::Mat& m) {
  if (reduction == 1) return region;
  const auto scaled = [reduction](int v) { return static_cast<int>(std::lround(static_cast<double>(v) / reduction)); };
  const int x = scaled(region.x), y = scaled(region.y);
  const int w = std::max(1, scaled(region.width)), h = std::max(1, scaled(region.height));
  return cv::Rect(x, y, w, h) & cv::Rect(0, 0, m.cols, m.rows);
}

// The draws' crop, taken from the (resized) image `m`: decoded at
// 1/reduction of the geometry's size for a random_resized crop.
cv::Mat crop(const cv::Mat& m, const TransformOptions& t, const Geometry& g, int reduction) {
  if (t.crop == "none") return m;
  if (t.crop == "random_resized") return resize_to(m(reduced(g.crop, reduction, m)), g.out.height, g.out.width);
  return m(g.crop).clone();
}

void check_channels(int channels, const TransformOptions& t) {
  if (!t.mean.empty() && static_cast<int>(t.mean.size()) != channels)
    throw trainyard::BadRecord("image has " + std::to_string(channels) + " channels, mean/std have " +
                               std::to_string(t.mean.size()) + " values");
}

// 8-bit HWC pixels to a uint8 {C, H, W} tensor: the planes pulled apart.
at::Tensor to_pixels(const cv::Mat& m) {
  const int channels = m.channels(), rows = m.rows, cols = m.cols;
  at::Tensor out = at::empty({channels, rows, cols}, at::kByte);
  uint8_t* plane = out.data_ptr<uint8_t>();
  const size_t plane_size = static_cast<size_t>(rows) * cols;
  if (channels == 1) {
    for (int r = 0; r < rows; ++r)
      std::memcpy(plane + static_cast<size_t>(r) * cols, m.ptr<uint8_t>(r), static_cast<size_t>(cols));
    return out;
  }
  std::vector<cv::Mat> planes;
  std::vector<int> from_to;
  for (int c = 0; c < channels; ++c) {
    planes.emplace_back(rows, cols, CV_8U, plane + c * plane_size);
    from_to.push_back(c), from_to.push_back(c);
  }
  cv::mixChannels(&m, 1, planes.data(), planes.size(), from_to.data(),
                  static_cast<size_t>(channels));  // into the tensor's planes
  return out;
}

// 8-bit HWC pixels to a normalized float {C, H, W} tensor in one pass through
// a table of the 256 values per channel: no float image in between.
at::Tensor to_tensor(const cv::Mat& m, const TransformOptions& t) {
  const int channels = m.channels(), rows = m.rows, cols = m.cols;
  check_channels(channels, t);
  if (t.output == "uint8") return to_pixels(m);
  std::vector<float> table(static_cast<size_t>(channels) * 256);
  for (int c = 0; c < channels; ++c)
    for (int v = 0; v < 256; ++v) {
      float x = static_cast<float>(v) / 255.0f;
      if (!t.mean.empty()) x = (x - static_cast<float>(t.mean[c])) * static_cast<float>(1.0 / t.std[c]);
      table[static_cast<size_t>(c) * 256 + v] = x;
    }
  at::Tensor out = at::empty({channels, rows, cols}, at::kFloat);
  float* plane = out.data_ptr<float>();
  const size_t plane_size = static_cast<size_t>(rows) * cols;
  for (int r = 0; r < rows; ++r) {
    const uint8_t* in = m.ptr<uint8_t>(r);
    for (int c = 0; c < channels; ++c) {
      const float* lut = table.data() + static_cast<size_t>(c) * 256;
      float* o = plane + c * plane_size + static_cast<size_t>(r) * cols;
      for (int x = 0; x < cols; ++x) o[x] = lut[in[x * channels + c]];
    }
  }
  return out;
}

}  // namespace

int decode_reduction(cv::Size full, const TransformOptions& t, uint64_t seed) {
  if (t.rotate_degrees > 0 || t.translate > 0) return 1;
  cv::Size needed, region = full;
  if (!t.load_size.empty() || t.resize_short > 0) {
    needed = trainyard::image_geometry::resized(full, t.load_size, t.resize_short);
  } else if (t.crop == "random_resized") {
    Draws draws(seed);
    region = random_resized_region(full, t, draws).size();
    needed = cv::Size(static_cast<int>(t.crop_size[1]), static_cast<int>(t.crop_size[0]));
  } else {
    return 1;
  }
  for (int r : {8, 4, 2})
    if (region.width / r >= needed.width && region.height / r >= needed.height) return r;
  return 1;
}

Geometry draw_geometry(cv::Size full, const TransformOptions& t, Draws& draws) {
  Geometry g;
  g.resized = trainyard::image_geometry::resized(full, t.load_size, t.resize_short);
  g.crop = cv::Rect(0, 0, g.resized.width, g.resized.height);
  if (t.crop == "random_resized") {
    g.crop = random_resized_region(g.resized, t, draws);
    g.out = cv::Size(static_cast<int>(t.crop_size[1]), static_cast<int>(t.crop_size[0]));
  } else if (t.crop != "none") {
    const int ch = static_cast<int>(t.crop_size[0]), cw = static_cast<int>(t.crop_size[1]);
    const int rows = g.resized.height, cols = g.resized.width;
    if (ch > rows || cw > cols)
      throw trainyard::BadRecord("image of " + std::to_string(rows) + "x" + std::to_string(cols) +
                                 " is smaller than crop_size " + std::to_string(ch) + "x" + std::to_string(cw) +
                                 " (set load_size)");
    g.crop = trainyard::image_geometry::center_crop(g.resized, ch, cw);
    if (t.crop == "random") {
      g.crop.y = static_cast<int>(draws.uniform(0, rows - ch + 1));
      g.crop.x = static_cast<int>(draws.uniform(0, cols - cw + 1));
    }
  }
  if (g.out.empty()) g.out = g.crop.size();
  g.hflip = draws.chance(t.hflip);
  g.vflip = draws.chance(t.vflip);
  return g;
}

cv::Rect decode_region(cv::Size full, const TransformOptions& t, uint64_t seed) {
  const cv::Rect whole(0, 0, full.width, full.height);
  if (t.rotate_degrees > 0 || t.translate > 0 || !t.load_size.empty() || t.resize_short > 0) return whole;
  if (t.crop == "random_resized") {
    Draws draws(seed);
    return random_resized_region(full, t, draws);
  }
  if (t.crop == "center" && t.crop_size[0] <= full.height && t.crop_size[1] <= full.width)
    return trainyard::image_geometry::center_crop(full, static_cast<int>(t.crop_size[0]),
                                                  static_cast<int>(t.crop_size[1]));
  return whole;
}

std::optional<cv::Mat> draw_affine(cv::Size size, const TransformOptions& t, Draws& draws) {
  if (t.rotate_degrees <= 0 && t.translate <= 0) return std::nullopt;
  const double angle = t.rotate_degrees > 0 ? draws.uniform(-t.rotate_degrees, t.rotate_degrees) : 0;
  const double dx = t.translate > 0 ? draws.uniform(-t.translate, t.translate) * size.width : 0;
  const double dy = t.translate > 0 ? draws.uniform(-t.translate, t.translate) * size.height : 0;
  cv::Mat affine = cv::getRotationMatrix2D(cv::Point2f(size.width / 2.0f, size.height / 2.0f), angle, 1.0);
  affine.at<double>(0, 2) += dx;
  affine.at<double>(1, 2) += dy;
  return affine;
}

namespace {
cv::Matx23d top_rows(const cv::Matx33d& m) { return {m(0, 0), m(0, 1), m(0, 2), m(1, 0), m(1, 1), m(1, 2)}; }
cv::Matx33d with_last_row(const cv::Matx23d& m) {
  return {m(0, 0), m(0, 1), m(0, 2), m(1, 0), m(1, 1), m(1, 2), 0, 0, 1};
}

// A box's four corners through `a`: their bounds. The rule of the SDK's
// trainyard::map_boxes, on plain doubles: the loader maps a few boxes per
// sample and makes no tensor for each.
std::array<double, 4> corners_through(const std::array<double, 4>& box, const cv::Matx23d& a) {
  double lo_x = INFINITY, lo_y = INFINITY, hi_x = -INFINITY, hi_y = -INFINITY;
  for (const double x : {box[0], box[2]})
    for (const double y : {box[1], box[3]}) {
      const double px = a(0, 0) * x + a(0, 1) * y + a(0, 2), py = a(1, 0) * x + a(1, 1) * y + a(1, 2);
      lo_x = std::min(lo_x, px), hi_x = std::max(hi_x, px), lo_y = std::min(lo_y, py), hi_y = std::max(hi_y, py);
    }
  return {lo_x, lo_y, hi_x, hi_y};
}

std::array<double, 4> clipped(const std::array<double, 4>& b, cv::Size out) {
  const double w = out.width, h = out.height;
  return {std::clamp(b[0], 0.0, w), std::clamp(b[1], 0.0, h), std::clamp(b[2], 0.0, w), std::clamp(b[3], 0.0, h)};
}
}  // namespace

SampleAffine sample_affine(cv::Size full, const TransformOptions& t, uint64_t seed) {
  Draws draws(seed);  // the image's draws, in the image's order
  const Geometry g = draw_geometry(full, t, draws);
  // Resize and crop scale and shift pixel edges exactly (OpenCV's resize
  // maps pixel centres as (x + 0.5) * scale - 0.5, which is edges scaled).
  const double sx = double(g.resized.width) / full.width * g.out.width / g.crop.width;
  const double sy = double(g.resized.height) / full.height * g.out.height / g.crop.height;
  const double ox = g.crop.x * double(g.out.width) / g.crop.width;
  const double oy = g.crop.y * double(g.out.height) / g.crop.height;
  cv::Matx33d m(sx, 0, -ox, 0, sy, -oy, 0, 0, 1);
  if (g.hflip) m = cv::Matx33d(-1, 0, g.out.width, 0, 1, 0, 0, 0, 1) * m;
  if (g.vflip) m = cv::Matx33d(1, 0, 0, 0, -1, g.out.height, 0, 0, 1) * m;
  SampleAffine result{top_rows(m), top_rows(m), std::nullopt, g.out};
  if (const auto affine = draw_affine(g.out, t, draws)) {
    // warpAffine's matrix maps pixel centres (a centre on integers): edges
    // are centres + 0.5, so p' = A (p - 0.5) + b + 0.5.
    const cv::Matx23d a(*affine);
    const double bx = a(0, 2) + 0.5 - 0.5 * (a(0, 0) + a(0, 1));
    const double by = a(1, 2) + 0.5 - 0.5 * (a(1, 0) + a(1, 1));
    result.motion = cv::Matx23d(a(0, 0), a(0, 1), bx, a(1, 0), a(1, 1), by);
    result.affine = top_rows(with_last_row(*result.motion) * m);
  }
  return result;
}

std::vector<std::array<double, 4>> transform_boxes(const std::vector<std::array<double, 4>>& boxes,
                                                   const SampleAffine& geometry, double min_visible, double min_size,
                                                   std::vector<size_t>& kept) {
  std::vector<std::array<double, 4>> result;
  kept.clear();
  for (size_t k = 0; k < boxes.size(); ++k) {
    const std::array<double, 4> whole = corners_through(boxes[k], geometry.affine);
    std::array<double, 4> b = clipped(corners_through(boxes[k], geometry.crop_stage), geometry.out);
    if (geometry.motion) b = clipped(corners_through(b, *geometry.motion), geometry.out);
    const double w = b[2] - b[0], h = b[3] - b[1];
    if (w < min_size || h < min_size || w * h < min_visible * (whole[2] - whole[0]) * (whole[3] - whole[1])) continue;
    result.push_back(b);
    kept.push_back(k);
  }
  return result;
}

at::Tensor apply_mask_transforms(const cv::Mat& mask, const TransformOptions& t, uint64_t seed, int64_t ignore_value) {
  const bool integer_ids = mask.depth() == CV_8U || mask.depth() == CV_16U;
  if (mask.channels() != 1 || !integer_ids)
    throw trainyard::BadRecord("a mask has one 8- or 16-bit channel of class ids (a grey PNG), this image has " +
                               std::to_string(mask.channels()) + " channel" + (mask.channels() == 1 ? "" : "s") +
                               (integer_ids ? "" : " of another depth"));
  // The image's draws, in the image's order: the same seed gives the same geometry.
  Draws draws(seed);
  const Geometry g = draw_geometry(mask.size(), t, draws);
  // Nearest neighbour everywhere (OpenCV's exact variant, as PIL's and
  // torchvision's nearest-exact): a class id is never mixed with another.
  const auto nearest = [](const cv::Mat& m, cv::Size size) {
    if (m.size() == size) return m;
    cv::Mat out;
    cv::resize(m, out, size, 0, 0, cv::INTER_NEAREST_EXACT);
    return out;
  };
  cv::Mat m = nearest(mask, g.resized);
  if (t.crop != "none") m = nearest(m(g.crop), g.out);
  m = m.clone();  // the flips work in place, never on the caller's pixels
  if (g.hflip) cv::flip(m, m, 1);
  if (g.vflip) cv::flip(m, m, 0);
  cv::Mat ids;
  m.convertTo(ids, CV_32S);  // room for an ignore value above 255
  if (const auto affine = draw_affine(ids.size(), t, draws))
    cv::warpAffine(ids, ids, *affine, ids.size(), cv::INTER_NEAREST, cv::BORDER_CONSTANT,
                   cv::Scalar::all(static_cast<double>(ignore_value)));
  return at::from_blob(ids.data, {ids.rows, ids.cols}, at::kInt).to(at::kLong);
}

at::Tensor apply_transforms(const cv::Mat& decoded, const TransformOptions& t, uint64_t seed, cv::Size full,
                            int reduction) {
  Draws draws(seed);
  if (full.empty()) full = decoded.size(), reduction = 1;
  // Color: tensors are RGB (or gray); OpenCV decodes BGR. Grey from colour
  // is made first (a weighted sum does not commute with resizing's
  // rounding); BGR to RGB and grey to RGB copy channels, which commutes with
  // resizing, cropping and flipping: done on the crop, not the whole photo.
  cv::Mat m = decoded;  // the caller's until a step writes a new image
  if (m.channels() == 4) {
    cv::Mat bgr;
    cv::cvtColor(m, bgr, cv::COLOR_BGRA2BGR);
    m = bgr;
  }
  if (t.color == "gray" && m.channels() == 3) {
    cv::Mat grey;
    cv::cvtColor(m, grey, cv::COLOR_BGR2GRAY);
    m = grey;
  }

  const Geometry g = draw_geometry(full, t, draws);
  if (g.resized != full) {  // load_size or resize_short
    m = resize_to(m, g.resized.height, g.resized.width);
    reduction = 1;
  }
  m = crop(m, t, g, reduction);
  if (m.datastart == decoded.datastart) m = m.clone();  // the flips below work in place
  if (m.channels() == 3)
    cv::cvtColor(m, m, cv::COLOR_BGR2RGB);
  else if (t.color == "rgb" && m.channels() == 1)
    cv::cvtColor(m, m, cv::COLOR_GRAY2RGB);
  if (g.hflip) cv::flip(m, m, 1);
  if (g.vflip) cv::flip(m, m, 0);
  if (const auto affine = draw_affine(m.size(), t, draws))
    cv::warpAffine(m, m, *affine, m.size(), cv::INTER_LINEAR, cv::BORDER_REFLECT_101);

  if (t.brightness == 0 && t.contrast == 0 && t.saturation == 0 && t.lighting == 0) return to_tensor(m, t);
  cv::Mat f;
  m.convertTo(f, CV_32F, 1.0 / 255.0);
  if (t.brightness > 0) f *= draws.uniform(1 - t.brightness, 1 + t.brightness);
  if (t.contrast > 0) {
    double factor = draws.uniform(1 - t.contrast, 1 + t.contrast);
    cv::Mat gray;
    if (f.channels() == 3)
      cv::cvtColor(f, gray, cv::COLOR_RGB2GRAY);
    else
      gray = f;
    double mean = cv::mean(gray)[0];
    f = (f - cv::Scalar::all(mean)) * factor + cv::Scalar::all(mean);
  }
  if (t.saturation > 0 && f.channels() == 3) {
    double factor = draws.uniform(1 - t.saturation, 1 + t.saturation);
    cv::Mat gray, gray3;
    cv::cvtColor(f, gray, cv::COLOR_RGB2GRAY);
    cv::cvtColor(gray, gray3, cv::COLOR_GRAY2RGB);
    cv::addWeighted(f, factor, gray3, 1 - factor, 0, f);
  }
  if (t.lighting > 0 && f.channels() == 3) {
    // AlexNet's PCA lighting: eigenvectors and eigenvalues of ImageNet RGB pixels.
    static const double eigval[3] = {0.2175, 0.0188, 0.0045};
    static const double eigvec[3][3] = {
        {-0.5675, 0.7192, 0.4009}, {-0.5808, -0.0045, -0.8140}, {-0.5836, -0.6948, 0.4203}};
    double alpha[3];
    for (double& a : alpha) a = draws.normal() * t.lighting;
    cv::Scalar shift;
    for (int c = 0; c < 3; ++c)
      shift[c] = eigvec[c][0] * alpha[0] * eigval[0] + eigvec[c][1] * alpha[1] * eigval[1] +
                 eigvec[c][2] * alpha[2] * eigval[2];
    f += shift;
  }
  if (t.output == "uint8") {
    cv::Mat pixels;
    f.convertTo(pixels, CV_8U, 255.0);  // rounds and saturates
    check_channels(pixels.channels(), t);
    return to_pixels(pixels);
  }
  if (!t.mean.empty()) {
    check_channels(f.channels(), t);
    cv::Scalar mean, inv_std;
    for (int c = 0; c < f.channels(); ++c) mean[c] = t.mean[c], inv_std[c] = 1.0 / t.std[c];
    cv::subtract(f, mean, f);
    cv::multiply(f, inv_std, f);
  }
  if (!f.isContinuous()) f = f.clone();
  // HWC float -> CHW tensor (clone: the Mat's memory goes away).
  return at::from_blob(f.data, {f.rows, f.cols, f.channels()}, at::kFloat)
      .permute({2, 0, 1})
      .clone(at::MemoryFormat::Contiguous);
}

}  // namespace image_datasets
