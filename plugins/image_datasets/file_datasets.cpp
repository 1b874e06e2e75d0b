// image_folder and csv: image files with class labels, listed by
// trainyard/labeled_files.h (the same lists `trainyard convert` makes).
#include <filesystem>

#include <ATen/ATen.h>
#include <trainyard/error.h>
#include <trainyard/labeled_files.h>

#include "image_dataset.h"

namespace fs = std::filesystem;

namespace image_datasets {
namespace {

using trainyard::ConfigError;
using trainyard::DataError;

class Files : public ImageDataset, public trainyard::AllLabels {
 public:
  Files(const PathDatasetOptions& o, trainyard::LabeledFiles files, const std::string& source)
      : ImageDataset(checked_transforms(o)), files_(std::move(files)) {
    describe(static_cast<int64_t>(files_.class_names.size()), files_.class_names, source);
  }
  int64_t size() const override { return static_cast<int64_t>(files_.paths.size()); }
  at::Tensor all_labels() const override { return at::tensor(files_.labels, at::kLong); }

 protected:
  LoadedSample load(int64_t index) const override {
    const size_t i = static_cast<size_t>(index);
    LoadedSample s;
    const std::string& path = files_.paths.at(i);
    s.inputs.push_back(SourceImage{read_file_bytes(path), {}, path, {}});
    s.label = at::scalar_tensor(files_.labels.at(i), at::kLong);
    return s;
  }

 private:
  trainyard::LabeledFiles files_;
};

const trainyard::TypedSchema<PathDatasetOptions>& image_folder_typed_schema() {
  static const auto s =
      path_dataset_schema("root", "folder with one sub-folder of images per class; relative to the experiment file");
  return s;
}

const trainyard::TypedSchema<PathDatasetOptions>& csv_typed_schema() {
  static const auto s = path_dataset_schema(
      "file",
      "CSV of path,label lines (a header line is allowed; relative image paths are taken from the CSV's "
      "folder); relative to the experiment file");
  return s;
}

}  // namespace

trainyard::Schema image_folder_schema() { return image_folder_typed_schema().schema(); }

std::shared_ptr<trainyard::Dataset> make_image_folder(const trainyard::Options& options) {
  const PathDatasetOptions o = image_folder_typed_schema().bind(options);
  const std::string& root = o.path;
  if (!fs::is_directory(root))
    throw ConfigError("root '" + root + "' is not a folder", "expected ROOT/<class>/<image files>", "check the path");
  trainyard::LabeledFiles files = trainyard::list_class_folders(root);
  if (files.paths.empty()) {
    std::string names;
    for (const auto& ext : trainyard::image_file_extensions()) names += (names.empty() ? "" : "|") + ext;
    throw DataError("root '" + root + "' holds no images", "expected ROOT/<class>/*." + names, "check the path");
  }
  return std::make_shared<Files>(o, std::move(files), "root '" + root + "'");
}

trainyard::Schema csv_schema() { return csv_typed_schema().schema(); }

std::shared_ptr<trainyard::Dataset> make_csv(const trainyard::Options& options) {
  const PathDatasetOptions o = csv_typed_schema().bind(options);
  return std::make_shared<Files>(o, trainyard::read_path_label_csv(o.path), "CSV '" + o.path + "'");
}

}  // namespace image_datasets
