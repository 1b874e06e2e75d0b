#include "gpu_decode.h"

#include <cstring>

#include <ATen/ATen.h>
#include <trainyard/error.h>

#include "jpeg_decode.h"
#include "resample.h"

namespace image_datasets {

GpuJob gpu_job(const Geometry& g, cv::Size full) {
  const float sx = static_cast<float>(full.width) / static_cast<float>(g.resized.width);
  const float sy = static_cast<float>(full.height) / static_cast<float>(g.resized.height);
  GpuJob job;
  job.full = full;
  job.x = static_cast<float>(g.crop.x) * sx, job.w = static_cast<float>(g.crop.width) * sx;
  job.y = static_cast<float>(g.crop.y) * sy, job.h = static_cast<float>(g.crop.height) * sy;
  job.hflip = g.hflip, job.vflip = g.vflip;
  return job;
}

namespace {

class ReferenceDecoder : public JpegBatchDecoder {
 public:
  c10::Device device() const override { return c10::Device(c10::DeviceType::CPU); }
  std::string description() const override {
    return "the GPU path's reference on the CPU (libjpeg whole-size decode, resample.h)";
  }

  at::Tensor decode(const std::vector<GpuJob>& jobs, int64_t rows, cv::Size out, const CpuRow& cpu_row) const override {
    at::Tensor batch = at::empty({rows, 3, out.height, out.width}, at::kByte);
    std::vector<std::optional<std::string>> refused(jobs.size());
    for (size_t k = 0; k < jobs.size(); ++k) {
      const GpuJob& job = jobs[k];
      std::optional<cv::Mat> bgr;
      try {
        bgr = decode_jpeg(job.data, job.size, 1, "reference decode");
      } catch (const trainyard::BadRecord& e) {
        refused[k] = e.what();  // as nvJPEG failing on it: the CPU path decides
        continue;
      }
      if (!bgr) {
        refused[k] = "not a JPEG libjpeg decodes to RGB";
        continue;
      }
      // nvJPEG's NVJPEG_OUTPUT_RGB: three planes, R first (a grey JPEG's
      // one channel in all three).
      const int channels = bgr->channels();
      std::vector<uint8_t> planes(static_cast<size_t>(3) * bgr->rows * bgr->cols);
      const size_t plane = static_cast<size_t>(bgr->rows) * bgr->cols;
      for (int r = 0; r < bgr->rows; ++r) {
        const uint8_t* p = bgr->ptr<uint8_t>(r);
        for (int c = 0; c < bgr->cols; ++c)
          for (int ch = 0; ch < 3; ++ch)
            planes[(2 - ch) * plane + static_cast<size_t>(r) * bgr->cols + c] =
                p[c * channels + (channels == 3 ? ch : 0)];
      }
      const ResampleJob resample{planes.data(), batch[job.row].data_ptr<uint8_t>(),
                                 bgr->cols,     bgr->rows,
                                 job.hflip,     job.vflip,
                                 job.x,         job.y,
                                 job.w,         job.h};
      for (int oy = 0; oy < out.height; ++oy)
        for (int ox = 0; ox < out.width; ++ox) resample_pixel(resample, out.width, out.height, ox, oy);
    }
    fill_cpu_rows(batch, jobs, refused, cpu_row);
    return batch;
  }
};

}  // namespace

void fill_cpu_rows(at::Tensor& batch, const std::vector<GpuJob>& jobs,
                   const std::vector<std::optional<std::string>>& refused, const JpegBatchDecoder::CpuRow& cpu_row) {
  std::vector<std::optional<std::string>> why(static_cast<size_t>(batch.size(0)));
  std::vector<bool> decoded(why.size(), false);
  for (size_t k = 0; k < jobs.size(); ++k) {
    const auto row = static_cast<size_t>(jobs[k].row);
    if (refused[k])
      why[row] = refused[k];
    else
      decoded[row] = true;
  }
  // A row for a device batch goes through pinned memory without waiting: a
  // copy from pageable memory would wait for the stream's queue (the caller
  // synchronises its stream before the batch leaves; LibTorch's pinned
  // allocator keeps each block until its copy is done).
  const bool on_device = !batch.is_cpu();
  for (size_t row = 0; row < why.size(); ++row) {
    if (decoded[row]) continue;
    at::Tensor pixels = cpu_row(static_cast<int64_t>(row), why[row]);
    if (on_device) pixels = pixels.pin_memory();
    batch[static_cast<int64_t>(row)].copy_(pixels, /*non_blocking=*/on_device);
  }
}

std::unique_ptr<JpegBatchDecoder> make_reference_decoder() { return std::make_unique<ReferenceDecoder>(); }

}  // namespace image_datasets
