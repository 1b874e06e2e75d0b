#pragma once
// An image dataset whose samples carry fields (SDK 1.5, trainyard/fields.h):
// each sample's original size and geometry, and with target: boxes its boxes
// through that geometry. The coco dataset, and lmdb and webdataset with
// target: boxes (what `trainyard convert --from coco --coco-target boxes`
// writes), are one: each reads a sample's image and annotations in one go
// (read_annotated), this class makes the fields and the target the same way
// for all three.
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include <trainyard/fields.h>

#include "image_dataset.h"

namespace image_datasets {

/// One box of a stored image, in that image's pixels.
struct StoredBox {
  std::array<double, 4> box{};  ///< x1, y1, x2, y2
  int64_t label = 0;            ///< 0 to K-1
  bool crowd = false;           ///< COCO's iscrowd: the meters ignore detections in it, the loss skips it
  double area = 0;              ///< COCO's area (the object's, not its box's), in the stored image's pixels
};

/// What a sample's fields are made from.
struct SampleAnnotations {
  cv::Size stored;                  ///< the image as stored: the pixels the boxes are in
  std::vector<StoredBox> boxes;     ///< with target: boxes
  std::optional<int64_t> image_id;  ///< the source's id of the image (COCO's), when it has one
};

/// A sample as read once: its images (target: mask, its mask) and its annotations.
struct AnnotatedSample {
  LoadedSample sample;  ///< its label is AnnotatedImageDataset's to set
  SampleAnnotations annotations;
};

class AnnotatedImageDataset : public ImageDataset, public trainyard::FieldDataset {
 public:
  using ImageDataset::ImageDataset;
  trainyard::FieldExample get_with_fields(int64_t index, uint64_t seed) const override;
  /// The batch as get_batch makes it (on a GPU with decode: gpu), the fields beside it.
  trainyard::FieldBatch get_batch_with_fields(const std::vector<int64_t>& indices,
                                              const std::vector<uint64_t>& seeds) const override;

 protected:
  /// Sample `index`'s images and annotations, each read once; throws
  /// trainyard::BadRecord naming the record for damaged ones (the boxes are
  /// checked here, before any image is decoded).
  virtual AnnotatedSample read_annotated(int64_t index) const = 0;
  /// read_annotated()'s sample with its target: with target: boxes the
  /// number of boxes not crowd (the loader's check_batch sees a class-like
  /// scalar; the boxes themselves are fields).
  LoadedSample load(int64_t index) const final { return labelled(read_annotated(index)).sample; }

 private:
  AnnotatedSample labelled(AnnotatedSample a) const;
  trainyard::Fields fields_of(const SampleAnnotations& a, uint64_t seed) const;
};

/// A record's `boxes` label (trainyard/record.h: kBoxLabelValues floats a
/// box) as boxes; throws BadRecord "WHAT: box K: ..." for a class or crowd
/// flag that is not an integer of its range (check_stored_boxes checks the rest).
std::vector<StoredBox> boxes_of_label(const std::vector<float>& values, const std::string& what);

/// The boxes of a `boxes` record label or shard member, checked against the
/// stored image (`stored`) and the class count: finite, x1 < x2 and y1 < y2,
/// inside the image (coco::box_inside: half a pixel of slack, as COCO's own boxes need),
/// classes 0 to classes - 1, a finite area above 0 (the crowd flag was
/// checked as it was read: StoredBox holds a bool). Throws
/// BadRecord "WHAT: box K: ..." for the first that is not.
void check_stored_boxes(const std::vector<StoredBox>& boxes, cv::Size stored, int64_t classes, const std::string& what);

}  // namespace image_datasets
