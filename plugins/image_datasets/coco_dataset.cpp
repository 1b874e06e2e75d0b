// coco: a folder of images with COCO instances annotations (the JSON of
// cocodataset.org that detection and segmentation toolkits read and write).
// With target: mask each image's annotations become one mask of class ids:
// category ids in sorted order are classes 1 to K, 0 is the background,
// crowd regions (iscrowd: 1) are ignore_index. With target: boxes each
// sample carries its boxes as SDK 1.5 fields (trainyard/fields.h): classes 0
// to K-1, the crowd flag, following the sample's geometry. Either way the
// sample's original size, geometry and image id are fields too, and the
// dataset says its category and image ids (SDK 1.5 AnnotationIds) for
// predict's results files.
#include <filesystem>
#include <map>

#include <ATen/ATen.h>
#include <trainyard/coco.h>
#include <trainyard/error.h>

#include "annotated_dataset.h"

namespace fs = std::filesystem;

namespace image_datasets {
namespace {

using trainyard::BadRecord;
using trainyard::ConfigError;
namespace coco = trainyard::coco;

struct CocoOptions : TransformOptions {
  std::string annotations;  ///< the instances JSON
  std::string images;       ///< the folder its file_names are relative to; empty: the JSON's folder
};

class Coco : public AnnotatedImageDataset, public trainyard::AnnotationIds {
 public:
  Coco(const CocoOptions& options, TransformOptions transforms, std::vector<coco::Image> images,
       std::vector<std::string> class_names, std::vector<int64_t> class_ids, const std::string& source)
      : AnnotatedImageDataset(std::move(transforms)),
        images_(std::move(images)),
        class_ids_(std::move(class_ids)),
        ignore_index_(options.ignore_index) {
    const auto classes = static_cast<int64_t>(class_names.size());  // before the names are moved
    describe(classes, std::move(class_names), source);
    for (const coco::Image& image : images_) image_ids_[comparable_path(image.path)] = image.id;
  }
  int64_t size() const override { return static_cast<int64_t>(images_.size()); }

  std::vector<int64_t> class_ids() const override { return class_ids_; }
  int64_t image_id(const std::string& path) const override {
    const auto it = image_ids_.find(comparable_path(path));
    return it == image_ids_.end() ? -1 : it->second;
  }

 protected:
  // The image file; its size and id; with target: mask the mask its regions
  // paint, with target: boxes each region's box (read_instances checked
  // them: a bad one is the image's `bad` reason).
  AnnotatedSample read_annotated(int64_t index) const override {
    const coco::Image& image = images_.at(static_cast<size_t>(index));
    if (!image.bad.empty()) throw BadRecord(image.bad);
    AnnotatedSample out;
    SampleAnnotations& a = out.annotations;
    a = {cv::Size(image.cols, image.rows), {}, image.id};
    // The JSON's size: the boxes' geometry is drawn on it, so the file must have it.
    out.sample.inputs.push_back(SourceImage{read_file_bytes(image.path), {}, image.path, a.stored});
    if (transforms().target == "boxes") {
      for (const coco::Region& r : image.regions)
        if (r.box) a.boxes.push_back({*r.box, r.category, r.crowd, coco::region_area(r)});
      return out;
    }
    // 16 bits: room for any class count and the ignore value.
    out.sample.targets.push_back(SourceImage{
        {}, coco::paint_mask(image, static_cast<int>(ignore_index_)), image.path + " (its COCO annotations)", {}});
    return out;
  }

 private:
  // One spelling of a path (absolute, no "..", symbolic links resolved) for image_id's lookups.
  static std::string comparable_path(const std::string& path) {
    std::error_code ec;
    const fs::path resolved = fs::weakly_canonical(fs::absolute(path), ec);
    return ec ? fs::absolute(path).lexically_normal().string() : resolved.string();
  }

  std::vector<coco::Image> images_;
  std::vector<int64_t> class_ids_;  ///< class k's category id (target: mask: class 0, the background, is 0)
  std::map<std::string, int64_t> image_ids_;
  int64_t ignore_index_;  ///< target: mask: the crowd regions' value
};

const trainyard::TypedSchema<CocoOptions>& coco_typed_schema() {
  static const auto s = [] {
    using O = CocoOptions;
    trainyard::TypedSchema<O> t;
    t.require_path("annotations", &O::annotations,
                   "COCO instances JSON (images, annotations, categories); relative to the experiment file");
    t.add_path("images", &O::images, "",
               "folder the images' file_name entries are relative to (default: the JSON's folder)");
    add_transform_options(t, /*boxes=*/true);
    return t;
  }();
  return s;
}

}  // namespace

trainyard::Schema coco_schema() { return coco_typed_schema().schema(); }

namespace {

std::shared_ptr<trainyard::Dataset> read_coco(CocoOptions o) {
  const std::string& file = o.annotations;
  if (o.target == "image")
    throw ConfigError("coco with target: image (the default)", "expected target: mask or target: boxes",
                      "add target: mask (segmentation) or target: boxes (detection)");
  const bool boxes = o.target == "boxes";
  coco::Instances set = coco::read_instances(file, o.images, boxes ? coco::Read::boxes : coco::Read::masks);
  // Masks: the background, then the categories in id order; boxes: the categories alone (0 to K-1).
  std::vector<std::string> names = set.category_names;
  std::vector<int64_t> class_ids = set.category_ids;
  if (!boxes) {
    names.insert(names.begin(), "background");
    class_ids.insert(class_ids.begin(), 0);
  }
  const int64_t classes = static_cast<int64_t>(names.size());
  if (o.mask_classes == 0 && !boxes) o.mask_classes = classes;
  if (!boxes && o.mask_classes != classes)
    throw ConfigError("mask_classes: " + std::to_string(o.mask_classes) + ", and " + file + " has " +
                          std::to_string(classes - 1) + " categories",
                      "expected the categories + 1 (the background), " + std::to_string(classes), "drop mask_classes");
  TransformOptions transforms = checked_transforms(o);
  return std::make_shared<Coco>(o, std::move(transforms), std::move(set.images), std::move(names), std::move(class_ids),
                                "annotations '" + file + "'");
}

}  // namespace

std::shared_ptr<trainyard::Dataset> make_coco(const trainyard::Options& options) {
  return read_coco(coco_typed_schema().bind(options));
}

}  // namespace image_datasets
