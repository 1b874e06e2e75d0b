#pragma once
// The GPU path's crop, resize and flip, one output pixel at a time: the
// arithmetic the CUDA kernel (resample.cu) runs per pixel, compiled for the
// CPU too, where reference_decoder() (gpu_decode.h) runs it to say what the
// GPU path produces. Plain C++ with no library beyond <cmath>: nvcc compiles
// it without LibTorch's headers.
//
// Per axis, as OpenCV's cv::resize on the crop (the CPU path): an output
// pixel that shrinks the source (more than one source pixel per output pixel)
// averages the source pixels it covers, weighted by the length covered
// (INTER_AREA); one that enlarges it interpolates the two nearest (INTER_LINEAR,
// pixel centres at +0.5, clamped to the region). The CPU path first decodes a
// shrunk photograph at 1/2, 1/4 or 1/8 by libjpeg's scaled IDCT; here the
// whole-size decode is averaged directly.
#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define TRAINYARD_HOST_DEVICE __host__ __device__
#else
#define TRAINYARD_HOST_DEVICE
#endif

namespace image_datasets {

/// One image of a batch: its decoded pixels (3 planes of height x width,
/// rows `width` bytes apart), the region to take in source pixels (may be
/// fractional: a crop drawn on a resized image), its flips, and where its
/// {3, out_height, out_width} output goes.
struct ResampleJob {
  const uint8_t* source;
  uint8_t* out;
  int32_t width, height;
  int32_t flip_x, flip_y;
  float x, y, w, h;
};

/// The source pixels one output pixel reads along one axis.
struct AxisSpan {
  int first, last;   ///< source pixels [first, last]
  float start, end;  ///< area: the covered interval
  float centre;      ///< linear: the sample position
  bool area;
};

/// Output pixel `o` of `outputs` along an axis whose region starts at
/// `origin` and spans `extent` of the image's `size` source pixels.
TRAINYARD_HOST_DEVICE inline AxisSpan axis_span(float origin, float extent, int outputs, int o, int size) {
  const float step = extent / static_cast<float>(outputs);
  const int lo = static_cast<int>(floorf(origin)) < 0 ? 0 : static_cast<int>(floorf(origin));
  int hi = static_cast<int>(ceilf(origin + extent)) - 1;
  if (hi > size - 1) hi = size - 1;
  if (hi < lo) hi = lo;
  AxisSpan s;
  s.area = step > 1.0f;
  s.start = origin + static_cast<float>(o) * step;
  s.end = s.start + step;
  s.centre = fminf(fmaxf(origin + (static_cast<float>(o) + 0.5f) * step - 0.5f, static_cast<float>(lo)),
                   static_cast<float>(hi));
  if (s.area) {
    s.first = static_cast<int>(floorf(s.start));
    s.last = static_cast<int>(ceilf(s.end)) - 1;
  } else {
    s.first = static_cast<int>(floorf(s.centre));
    s.last = s.first + 1;
  }
  if (s.first < lo) s.first = lo;
  if (s.last > hi) s.last = hi;
  if (s.last < s.first) s.last = s.first;
  return s;
}

TRAINYARD_HOST_DEVICE inline float axis_weight(const AxisSpan& s, int i) {
  if (s.area) return fmaxf(0.0f, fminf(s.end, static_cast<float>(i) + 1.0f) - fmaxf(s.start, static_cast<float>(i)));
  return fmaxf(0.0f, 1.0f - fabsf(s.centre - static_cast<float>(i)));
}

/// Writes output pixel (ox, oy) of `job`, all 3 channels. A horizontal flip
/// puts source column out_width - 1 - ox's value at ox (and likewise rows).
TRAINYARD_HOST_DEVICE inline void resample_pixel(const ResampleJob& job, int out_width, int out_height, int ox,
                                                 int oy) {
  const int sx = job.flip_x ? out_width - 1 - ox : ox;
  const int sy = job.flip_y ? out_height - 1 - oy : oy;
  const AxisSpan ax = axis_span(job.x, job.w, out_width, sx, job.width);
  const AxisSpan ay = axis_span(job.y, job.h, out_height, sy, job.height);
  float wx_sum = 0, wy_sum = 0;
  for (int i = ax.first; i <= ax.last; ++i) wx_sum += axis_weight(ax, i);
  for (int i = ay.first; i <= ay.last; ++i) wy_sum += axis_weight(ay, i);
  const float norm = 1.0f / (wx_sum * wy_sum);
  const size_t plane = static_cast<size_t>(job.width) * static_cast<size_t>(job.height);
  const size_t out_plane = static_cast<size_t>(out_width) * static_cast<size_t>(out_height);
  for (int c = 0; c < 3; ++c) {
    float sum = 0;
    for (int iy = ay.first; iy <= ay.last; ++iy) {
      const uint8_t* row = job.source + c * plane + static_cast<size_t>(iy) * static_cast<size_t>(job.width);
      float row_sum = 0;
      for (int ix = ax.first; ix <= ax.last; ++ix) row_sum += axis_weight(ax, ix) * static_cast<float>(row[ix]);
      sum += axis_weight(ay, iy) * row_sum;
    }
    const float value = floorf(sum * norm + 0.5f);
    job.out[c * out_plane + static_cast<size_t>(oy) * out_width + ox] =
        static_cast<uint8_t>(value < 0.0f ? 0.0f : (value > 255.0f ? 255.0f : value));
  }
}

}  // namespace image_datasets
