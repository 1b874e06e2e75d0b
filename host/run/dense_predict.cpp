#include "run/dense_predict.h"

#include <unistd.h>

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

namespace {

template <class T>
T value_or(const std::map<std::string, Value>& values, const std::string& key, T fallback) {
  const auto it = values.find(key);
  if (it == values.end()) return fallback;
  const T* v = std::get_if<T>(&it->second);
  return v ? *v : fallback;
}

// The size of an image decoded from `path` (its stored size: what the dataset resized and cropped).
cv::Size stored_size(const std::string& path) {
  const std::string bytes = read_whole_file(path);
  try {
    return image_codec::decode(bytes.data(), bytes.size()).size();
  } catch (const image_codec::Error& e) {
    throw ConfigError("predict: " + path + ": cannot decode it (" + e.what() + ")", "expected an image file", "");
  }
}

}  // namespace

ImageGeometry image_geometry(const std::map<std::string, Value>& preprocessing) {
  ImageGeometry g;
  g.load_size = value_or<std::vector<int64_t>>(preprocessing, "load_size", {});
  g.resize_short = value_or<int64_t>(preprocessing, "resize_short", 0);
  g.crop_size = value_or<std::vector<int64_t>>(preprocessing, "crop_size", {});
  g.center_crop = value_or<std::string>(preprocessing, "crop", "none") != "none" && g.crop_size.size() == 2;
  return g;
}

cv::Mat mask_at_original_size(const cv::Mat& predicted, cv::Size original, const ImageGeometry& g, int unknown) {
  // The resized size, by the datasets' rules (transforms.cpp: draw_geometry, short_side_size).
  cv::Size resized = original;
  if (g.load_size.size() == 2) {
    resized = cv::Size(static_cast<int>(g.load_size[1]), static_cast<int>(g.load_size[0]));
  } else if (g.resize_short > 0) {
    const double scale = static_cast<double>(g.resize_short) / std::min(original.width, original.height);
    resized = cv::Size(std::max(1, static_cast<int>(std::lround(original.width * scale))),
                       std::max(1, static_cast<int>(std::lround(original.height * scale))));
  }
  cv::Mat canvas = predicted;
  if (g.center_crop) {
    canvas = cv::Mat(resized, predicted.type(), cv::Scalar::all(unknown));
    const cv::Rect crop((resized.width - predicted.cols) / 2, (resized.height - predicted.rows) / 2, predicted.cols,
                        predicted.rows);
    predicted.copyTo(canvas(crop));
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
  if (input.labeled)
    throw ConfigError("predict: --input " + request.input + " is an LMDB, and the network scores every pixel",
                      "expected a folder of image files: each mask is written at its image's size, which an LMDB's "
                      "records do not keep",
                      "");
  const fs::path out = request.output;
  if (fs::exists(out))
    throw ConfigError("predict: --output " + request.output + " exists",
                      "expected a new folder for the masks (the network scores every pixel)",
                      "remove it or choose another");
  const fs::path partial = out.string() + ".partial-" + std::to_string(::getpid());
  fs::remove_all(partial);
  fs::create_directories(partial / "masks");
  // Nothing half-written: the folder appears whole, or not at all.
  struct RemovePartial {
    fs::path path;
    ~RemovePartial() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } remove_partial{partial};
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
    const cv::Mat original = mask_at_original_size(mask, stored_size(source), geometry, unknown);
    const fs::path name = names[static_cast<size_t>(sample)];
    fs::create_directories((partial / name).parent_path());
    write_file_atomic((partial / name).string(), image_codec::encode_png(original));
    csv += csv_row(
        {std::to_string(sample), source, name.string(), std::to_string(original.rows), std::to_string(original.cols)});
    ++written;
  }
  write_file_atomic((partial / "predictions.csv").string(), csv);
  fs::rename(partial, out);
  return written;
}

}  // namespace trainyard::host
