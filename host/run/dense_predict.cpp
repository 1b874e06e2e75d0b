#include "run/dense_predict.h"

#include <cmath>
#include <filesystem>

#include <ATen/ATen.h>
#include <opencv2/imgproc.hpp>

#include "train/guard.h"
#include "trainyard/error.h"
#include "trainyard/image_codec.h"
#include "util/csv.h"
#include "util/files.h"

namespace fs = std::filesystem;

namespace trainyard::host {

cv::Mat mask_at_original_size(const cv::Mat& predicted, cv::Size original, const ImageGeometry& g, int unknown) {
  const cv::Size resized = resized_size(original, g);
  cv::Mat canvas = predicted;
  if (g.center_crop) {
    canvas = cv::Mat(resized, predicted.type(), cv::Scalar::all(unknown));
    predicted.copyTo(canvas(center_crop(resized, g)));
  }
  if (canvas.size() == original) return canvas;
  cv::Mat out;
  cv::resize(canvas, out, original, 0, 0, cv::INTER_NEAREST_EXACT);
  return out;
}

bool scores_pixels(const LoadedModel& m) {
  const std::vector<int64_t>& shape = m.context.dataset.sample_shape;
  if (shape.size() != 3) return false;
  Batch probe;
  probe.input = at::zeros({1, shape[0], shape[1], shape[2]}, at::TensorOptions().device(m.context.device));
  probe.target = at::zeros({1}, at::TensorOptions().dtype(at::kLong).device(m.context.device));
  probe.indices = {0};
  Network& net = m.network();
  net.eval();
  at::NoGradGuard no_grad;
  const at::Tensor out = m.evaluator().forward(probe);
  return out.dim() == 4 && out.size(2) == shape[1] && out.size(3) == shape[2];
}

int64_t predict_masks(const LoadedModel& m, InputSet& input, const PredictRequest& request) {
  check_image_prediction(input.labeled, request.input, request.output, "scores every pixel",
                         "each mask is written at its image's size");
  const fs::path out = request.output;
  NewFolder folder(out.string());  // nothing half-written: the folder appears whole, or not at all
  const fs::path partial = folder.dir();
  fs::create_directories(partial / "masks");
  const ImageGeometry geometry = image_geometry(input.preprocessing);
  const int64_t classes = m.context.dataset.num_classes;
  const bool wide = classes > 255;  // 8-bit ids up to 254, 255 for pixels outside the crop
  const int unknown = wide ? 65535 : 255;
  // Each image's mask: its path below the input folder, with .png (a.jpg and a.png would share one).
  const fs::path root = fs::absolute(request.input);
  std::vector<std::string> names;
  std::map<std::string, std::string> taken;
  for (const auto& source : input.sources) {
    names.push_back((fs::path("masks") / fs::relative(source, root).replace_extension(".png")).string());
    if (const auto [at, fresh] = taken.emplace(names.back(), source); !fresh)
      throw ConfigError("predict: " + at->second + " and " + source + " would both write " + names.back(),
                        "expected images whose names differ by more than their extension", "move one of them");
  }
  std::vector<int64_t> order(static_cast<size_t>(input.dataset->size()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  input.loader.batch_size = 1;  // images of any size: one at a time
  BatchStream batches = batch_stream(*input.dataset, order, 0, 0, input.loader, std::make_shared<LoaderStats>());
  const Evaluator evaluator = m.evaluator();
  m.network().eval();
  at::NoGradGuard no_grad;
  std::string csv = csv_row({"index", "source", "mask", "height", "width"});
  int64_t written = 0;
  while (auto batch = batches()) {
    const at::Tensor ids =
        evaluator.forward(*batch).argmax(1)[0].to(at::kCPU, wide ? at::kInt : at::kByte).contiguous();
    const cv::Mat predicted(static_cast<int>(ids.size(0)), static_cast<int>(ids.size(1)), wide ? CV_32S : CV_8U,
                            ids.data_ptr());
    cv::Mat mask = predicted;
    if (wide) predicted.convertTo(mask, CV_16U);
    const int64_t sample = batch->indices[0];
    const std::string& source = input.sources[static_cast<size_t>(sample)];
    const cv::Mat original = mask_at_original_size(mask, stored_size(source, "predict"), geometry, unknown);
    const fs::path name = names[static_cast<size_t>(sample)];
    fs::create_directories((partial / name).parent_path());
    write_file_atomic((partial / name).string(), image_codec::encode_png(original));
    csv += csv_row(
        {std::to_string(sample), source, name.string(), std::to_string(original.rows), std::to_string(original.cols)});
    ++written;
  }
  write_file_atomic((partial / "predictions.csv").string(), csv);
  folder.commit();
  return written;
}

}  // namespace trainyard::host
