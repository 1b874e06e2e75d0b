#pragma once
// `decode: gpu`: a batch's JPEGs decoded by nvJPEG on the run's GPU, then
// cropped, resized and flipped there (resample.cu) straight into the batch's
// uint8 rows, which the host normalizes on the device as for the CPU path.
// The decode threads still read the bytes and draw every sample's geometry
// (draw_geometry: the CPU path's draws, so a seed gives the same crop and
// flip on either path); what nvJPEG does not take goes through the CPU path.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <opencv2/core.hpp>

#include "transforms.h"

namespace image_datasets {

/// One JPEG for the GPU path: its bytes, its size as its header says, and
/// the region its geometry takes, in that size's pixels.
struct GpuJob {
  const unsigned char* data = nullptr;
  size_t size = 0;
  cv::Size full;
  float x = 0, y = 0, w = 0, h = 0;
  bool hflip = false, vflip = false;
  int64_t row = 0;  ///< the batch row it fills
};

/// `geometry` (drawn for an image of `full` size) as a GpuJob's region: the
/// crop, drawn on the resized image, scaled back to the full size's pixels.
GpuJob gpu_job(const Geometry& geometry, cv::Size full);

/// Turns a batch's JPEGs into pixels on device(). Called from several decode
/// threads at once.
class JpegBatchDecoder {
 public:
  virtual ~JpegBatchDecoder() = default;
  virtual c10::Device device() const = 0;
  /// What decodes: "nvJPEG 13.2.3 (hardware backend, 3 engines) on cuda:0".
  virtual std::string description() const = 0;
  /// The CPU path's {3, out.height, out.width} uint8 pixels for a batch row
  /// the decoder did not fill: `refused` says why nvJPEG left its job (it
  /// does not take that JPEG, or failed on it), nothing for a row no job
  /// asked for. May throw (a BadRecord): decode() then throws it.
  using CpuRow = std::function<at::Tensor(int64_t row, const std::optional<std::string>& refused)>;
  /// A {rows, 3, out.height, out.width} uint8 tensor on device(): each job's
  /// row holds its crop (RGB), every other row `cpu_row`'s pixels, copied on
  /// the decoder's own stream; complete when this returns.
  virtual at::Tensor decode(const std::vector<GpuJob>& jobs, int64_t rows, cv::Size out,
                            const CpuRow& cpu_row) const = 0;
};

/// For the decoders: every row of `batch` no job of `jobs` decoded (refused
/// by the decoder, or asked for by none) filled with `cpu_row`'s pixels, on
/// the current stream.
void fill_cpu_rows(at::Tensor& batch, const std::vector<GpuJob>& jobs,
                   const std::vector<std::optional<std::string>>& refused, const JpegBatchDecoder::CpuRow& cpu_row);

/// nvJPEG on `device` (a CUDA device): the hardware backend where the GPU
/// has JPEG engines (A100, H100, H200, ...), the CUDA backend for the JPEGs
/// those refuse and on every other GPU. Throws trainyard::ConfigError naming
/// what is missing (nvjpeg_unavailable()).
std::unique_ptr<JpegBatchDecoder> make_nvjpeg_decoder(c10::Device device);

/// Why this build or machine cannot decode on the GPU (built without CUDA or
/// nvJPEG's header; libnvjpeg.so cannot be loaded), or nothing.
std::optional<std::string> nvjpeg_unavailable();
/// Why nvJPEG's library `file` cannot be used (not found, too old, a build
/// without nvJPEG), or "" when it loads with every entry point trainyard calls.
std::string nvjpeg_load_error(const std::string& file);

/// The GPU path as specified, run on the CPU: libjpeg's whole-size decode,
/// then resample.h's arithmetic, the kernel's. Tests compare it with the CPU
/// path and use it to run the GPU path's batching where no GPU is.
std::unique_ptr<JpegBatchDecoder> make_reference_decoder();

}  // namespace image_datasets
