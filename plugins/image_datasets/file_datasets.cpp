// image_folder and csv: image files with class labels, or with a mask each
// (target: mask), listed by trainyard/labeled_files.h (the same lists and
// pairs `trainyard convert` makes).
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

// Images with a mask each (target: mask): the mask is the sample's target
// image, read by ImageDataset::target_of.
class MaskedFiles : public ImageDataset {
 public:
  MaskedFiles(const PathDatasetOptions& o, trainyard::PairedFiles files, const std::string& source)
      : ImageDataset(checked_transforms(o)), files_(std::move(files)) {
    describe(0, {}, source);
  }
  int64_t size() const override { return static_cast<int64_t>(files_.inputs.size()); }

 protected:
  LoadedSample load(int64_t index) const override {
    const size_t i = static_cast<size_t>(index);
    LoadedSample s;
    s.inputs.push_back(SourceImage{read_file_bytes(files_.inputs.at(i)), {}, files_.inputs[i], {}});
    s.targets.push_back(SourceImage{read_file_bytes(files_.targets.at(i)), {}, files_.targets[i], {}});
    return s;
  }

 private:
  trainyard::PairedFiles files_;
};

struct FolderOptions : PathDatasetOptions {
  std::string masks;  ///< target: mask: the folder of masks, one beside each image of `path`
};

const trainyard::TypedSchema<FolderOptions>& image_folder_typed_schema() {
  static const auto s = [] {
    auto s = path_dataset_schema<FolderOptions>(
        "root",
        "folder with one sub-folder of images per class (target: mask: the folder of the images); relative to the "
        "experiment file");
    s.add_path("masks", &FolderOptions::masks, "",
               "target: mask: the folder of the masks, one per image of root with its name or its stem (root/a.jpg: "
               "masks/a.png); relative to the experiment file");
    return s;
  }();
  return s;
}

const trainyard::TypedSchema<PathDatasetOptions>& csv_typed_schema() {
  static const auto s = path_dataset_schema(
      "file",
      "CSV of path,label lines (target: mask: image,mask lines; a header line is allowed; relative paths are taken "
      "from the CSV's folder); relative to the experiment file");
  return s;
}

}  // namespace

trainyard::Schema image_folder_schema() { return image_folder_typed_schema().schema(); }

std::shared_ptr<trainyard::Dataset> make_image_folder(const trainyard::Options& options) {
  const FolderOptions o = image_folder_typed_schema().bind(options);
  const std::string& root = o.path;
  const bool masked = o.target == "mask";
  if (masked != !o.masks.empty())
    throw ConfigError(masked ? "target: mask without masks" : "masks: '" + o.masks + "' without target: mask",
                      "expected target: mask and masks: DIR together (the images in root, their masks in DIR)", "");
  if (!fs::is_directory(root))
    throw ConfigError("root '" + root + "' is not a folder",
                      masked ? "expected a folder of images" : "expected ROOT/<class>/<image files>", "check the path");
  if (masked) {
    if (!fs::is_directory(o.masks))
      throw ConfigError("masks '" + o.masks + "' is not a folder", "expected a folder of masks", "check the path");
    return std::make_shared<MaskedFiles>(o, trainyard::pair_image_folders(root, o.masks),
                                         "root '" + root + "' with masks '" + o.masks + "'");
  }
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
  if (o.target == "mask")
    return std::make_shared<MaskedFiles>(o, trainyard::read_path_pair_csv(o.path), "CSV '" + o.path + "'");
  return std::make_shared<Files>(o, trainyard::read_path_label_csv(o.path), "CSV '" + o.path + "'");
}

}  // namespace image_datasets
