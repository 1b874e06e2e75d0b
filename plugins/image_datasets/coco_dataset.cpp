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
#include <trainyard/fields.h>

#include "image_dataset.h"

namespace fs = std::filesystem;

namespace image_datasets {
namespace {

using trainyard::BadRecord;
using trainyard::ConfigError;
namespace coco = trainyard::coco;

struct CocoOptions : TransformOptions {
  std::string annotations;        ///< the instances JSON
  std::string images;             ///< the folder its file_names are relative to; empty: the JSON's folder
  double min_box_visible = 0.25;  ///< target: boxes: a box keeps at least this share of its area after a crop
  double min_box_size = 1;        ///< target: boxes: ... and this width and height in the sample's pixels
};

// at::Tensor of a 2x3 double matrix.
at::Tensor matrix_tensor(const cv::Matx23d& m) {
  return at::tensor(std::vector<double>(m.val, m.val + 6), at::kDouble).view({2, 3});
}

class Coco : public ImageDataset, public trainyard::FieldDataset, public trainyard::AnnotationIds {
 public:
  Coco(const CocoOptions& options, TransformOptions transforms, std::vector<coco::Image> images,
       std::vector<std::string> class_names, std::vector<int64_t> class_ids, const std::string& source)
      : ImageDataset(std::move(transforms)),
        images_(std::move(images)),
        class_ids_(std::move(class_ids)),
        min_box_visible_(options.min_box_visible),
        min_box_size_(options.min_box_size),
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

  trainyard::FieldExample get_with_fields(int64_t index, uint64_t seed) const override {
    trainyard::Fields fields = fields_of(index, seed);  // first: a bad box needs no decode
    return {get_seeded(index, seed), std::move(fields)};
  }
  /// The batch as get_batch makes it (on a GPU with decode: gpu), the fields beside it.
  trainyard::FieldBatch get_batch_with_fields(const std::vector<int64_t>& indices,
                                              const std::vector<uint64_t>& seeds) const override {
    std::vector<trainyard::Fields> fields;
    fields.reserve(indices.size());
    for (size_t k = 0; k < indices.size(); ++k) fields.push_back(fields_of(indices[k], seeds[k]));
    return {get_batch(indices, seeds), trainyard::collate_fields(fields, indices)};
  }

 protected:
  LoadedSample load(int64_t index) const override {
    const coco::Image& image = images_.at(static_cast<size_t>(index));
    if (!image.bad.empty()) throw BadRecord(image.bad);
    LoadedSample s;
    // The JSON's size: the boxes' geometry is drawn on it, so the file must have it.
    s.inputs.push_back(SourceImage{read_file_bytes(image.path), {}, image.path, cv::Size(image.cols, image.rows)});
    if (transforms().target == "boxes") {
      int64_t boxes = 0;
      for (const coco::Region& r : image.regions) boxes += !r.crowd;
      s.label = at::scalar_tensor(boxes, at::kLong);
      return s;
    }
    // 16 bits: room for any class count and the ignore value.
    s.targets.push_back(SourceImage{
        {}, coco::paint_mask(image, static_cast<int>(ignore_index_)), image.path + " (its COCO annotations)", {}});
    return s;
  }

 private:
  // The sample's fields: its image's size, id and geometry, and with
  // target: boxes its boxes through that geometry.
  trainyard::Fields fields_of(int64_t index, uint64_t seed) const {
    namespace name = trainyard::field_name;
    const coco::Image& image = images_.at(static_cast<size_t>(index));
    if (!image.bad.empty()) throw BadRecord(image.bad);
    const SampleAffine geometry = sample_affine(cv::Size(image.cols, image.rows), transforms(), seed);
    trainyard::Fields f;
    f[name::original_size] = trainyard::meta(at::tensor({int64_t{image.rows}, int64_t{image.cols}}, at::kLong));
    f[name::input_from_original] = trainyard::meta(matrix_tensor(geometry.affine));
    f[name::image_id] = trainyard::meta(at::scalar_tensor(image.id, at::kLong));
    if (transforms().target != "boxes") return f;
    std::vector<coco::Box> boxes;
    std::vector<const coco::Region*> owners;
    for (const coco::Region& r : image.regions)
      if (r.box) boxes.push_back(*r.box), owners.push_back(&r);
    std::vector<size_t> kept;
    const std::vector<coco::Box> out = transform_boxes(boxes, geometry, min_box_visible_, min_box_size_, kept);
    std::vector<float> xyxy, areas;
    std::vector<int64_t> labels, crowd;
    for (size_t k = 0; k < out.size(); ++k) {
      const coco::Region& r = *owners[kept[k]];
      for (const double v : out[k]) xyxy.push_back(static_cast<float>(v));
      labels.push_back(r.category);
      crowd.push_back(r.crowd ? 1 : 0);
      const coco::Box& b = *r.box;
      areas.push_back(static_cast<float>(r.area > 0 ? r.area : (b[2] - b[0]) * (b[3] - b[1])));
    }
    const auto n = static_cast<int64_t>(out.size());
    f[name::boxes] = trainyard::ragged(at::tensor(xyxy, at::kFloat).view({n, 4}));
    f[name::box_labels] = trainyard::ragged(at::tensor(labels, at::kLong));
    f[name::box_crowd] = trainyard::ragged(at::tensor(crowd, at::kLong));
    f[name::box_area] = trainyard::ragged(at::tensor(areas, at::kFloat));
    return f;
  }

  // One spelling of a path (absolute, no "..", symbolic links resolved) for image_id's lookups.
  static std::string comparable_path(const std::string& path) {
    std::error_code ec;
    const fs::path resolved = fs::weakly_canonical(fs::absolute(path), ec);
    return ec ? fs::absolute(path).lexically_normal().string() : resolved.string();
  }

  std::vector<coco::Image> images_;
  std::vector<int64_t> class_ids_;  ///< class k's category id (target: mask: class 0, the background, is 0)
  std::map<std::string, int64_t> image_ids_;
  double min_box_visible_, min_box_size_;
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
    t.add("min_box_visible", &O::min_box_visible, 0.25,
          "target: boxes: a box a crop or rotation cuts is kept when at least this share of its area is left")
        .range(0.0, 1.0);
    t.add("min_box_size", &O::min_box_size, 1.0,
          "target: boxes: a kept box is at least this many pixels wide and high in the sample")
        .min(0.0);
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
  if (boxes && o.mask_classes != 0)
    throw ConfigError("mask_classes with target: boxes", "expected mask_classes with target: mask only",
                      "drop mask_classes");
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
