#pragma once
// `decode: gpu`: a batch's JPEGs decoded by nvJPEG on the run's GPU, then
// cropped, resized and flipped there (resample.cu) straight into the batch's
// uint8 rows, which the host normalizes on the device as for the CPU path.
// The decode threads still read the bytes and draw every sample's geometry
// (draw_geometry: the CPU path's draws, so a seed gives the same crop and
// flip on either path); what nvJPEG does not take goes through the CPU path.
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
  /// A {rows, 3, out.height, out.width} uint8 tensor on device() whose job
  /// rows hold their crops (RGB), complete when this returns. `refused[k]`
  /// gets why jobs[k]'s row was left unwritten (nvJPEG does not take that
  /// JPEG, or failed on it): the caller fills it through the CPU path.
  virtual at::Tensor decode(const std::vector<GpuJob>& jobs, int64_t rows, cv::Size out,
                            std::vector<std::optional<std::string>>& refused) const = 0;
};

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
