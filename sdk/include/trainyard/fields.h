#pragma once
/// Since SDK 1.5: named fields a sample carries beside its input and target
/// (boxes and their labels for detection, the original image size, the
/// geometry a sample went through), each with a collation rule, and the
/// optional interfaces of the components that make or read them.
///
/// Fields ride beside a Batch, not inside it: Batch keeps the layout plugins
/// of SDK 1.0-1.4 construct (docs/sdk-changes.md). The host's loader asks a
/// dataset that implements FieldDataset for its fields, checks them, pins
/// them and copies them to the run's device with the batch, and hands them to
/// a loss that implements FieldLoss and a meter that implements FieldMeter.
/// Each sample of a batch is the same sample whichever thread decoded it, on
/// every rank and after a resume: fields come from the sample's seed, as its
/// input does.
///
/// Kinds and their collation (`collate` below), per sample -> per batch:
///   dense   {H, W, ...}    -> {B, H', W', ...}: padded to the largest size
///                             of the batch with `fill` (a mask's ignore value)
///   ragged  {n_k, ...}     -> values {n_0 + ... + n_{B-1}, ...} in sample
///                             order, and counts int64 {B} = n_k (boxes and
///                             their labels: any number per sample, 0 too)
///   meta    {...}          -> {B, ...}: stacked (one fixed shape for all)
///
/// Coordinates (the convention of COCO and torchvision's boxes): x to the
/// right, y down, in pixels, with pixel edges on integers: an image's
/// top-left corner is (0, 0), its bottom-right corner (width, height), the
/// centre of pixel (row i, column j) is (j + 0.5, i + 0.5). A box is
/// (x1, y1, x2, y2) with x1 < x2 and y1 < y2; the pixels whose centres it
/// holds are the pixels it covers.
///
/// Example (a detection dataset's sample, in input pixels):
///   trainyard::FieldExample e{{image, at::scalar_tensor(int64_t(2))}, {}};
///   e.fields[trainyard::field_name::boxes] = trainyard::ragged(at::tensor({10.f, 12, 40, 50, 0, 0, 8, 8}).view({2, 4}));
///   e.fields[trainyard::field_name::box_labels] = trainyard::ragged(at::tensor({3, 0}, at::kLong));

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "trainyard/batch.h"
#include "trainyard/meter.h"

namespace trainyard {

enum class FieldKind { dense, ragged, meta };
/// "dense", "ragged" or "meta", as errors name a kind.
const char* kind_name(FieldKind kind);

/// One field of a sample, or of a batch (after collate).
struct Field {
  FieldKind kind = FieldKind::meta;
  at::Tensor values;
  /// Ragged, in a batch: int64 {B}, sample k's rows, on the CPU (where the
  /// values are on a GPU too: splitting them never waits for the device);
  /// undefined in a sample and for the other kinds.
  at::Tensor counts;
  /// Dense: the value padding takes (a mask's ignore_index).
  double fill = 0;
};

/// Fields by name (lower-case letters, digits, '_').
using Fields = std::map<std::string, Field>;

/// A sample with its fields; `example` is what Dataset::get_seeded gives.
struct FieldExample {
  Example example;
  Fields fields;
};

/// A batch with its fields, each collated over the batch's samples.
struct FieldBatch {
  Batch batch;
  Fields fields;
};

inline Field dense(at::Tensor values, double fill) { return {FieldKind::dense, std::move(values), {}, fill}; }
inline Field ragged(at::Tensor values) { return {FieldKind::ragged, std::move(values), {}, 0}; }
inline Field meta(at::Tensor values) { return {FieldKind::meta, std::move(values), {}, 0}; }

/// The fields trainyard's own components make and read. The host checks
/// these by name wherever they appear (any dataset's); other names pass
/// through unchecked beyond their kind's shape rules.
namespace field_name {
/// ragged float32 {n, 4}: boxes (x1, y1, x2, y2) in the input's pixels,
/// finite, x1 < x2 and y1 < y2.
inline constexpr char boxes[] = "boxes";
/// ragged int64 {n}: each box's class, 0 to num_classes - 1 (DatasetInfo);
/// counts equal to boxes'.
inline constexpr char box_labels[] = "box_labels";
/// ragged int64 {n}: 1 for a crowd box (COCO's iscrowd: a region of many
/// objects, matched by no loss and ignored by the mAP), else 0; counts equal
/// to boxes'. Absent: no box is a crowd.
inline constexpr char box_crowd[] = "box_crowd";
/// meta int64 {2}: the original image's (height, width) in pixels.
inline constexpr char original_size[] = "original_size";
/// meta float64 {2, 3}: the affine map from the original image's pixel
/// coordinates to the input's, p_input = A * (x, y, 1): the sample's whole
/// geometry (resize, crop, flips, rotation, translation) in one matrix.
inline constexpr char input_from_original[] = "input_from_original";
/// meta int64 {}: the sample's id in its source (COCO's image id).
inline constexpr char image_id[] = "image_id";
/// ragged float {n}: each box's area in the original image's pixels where
/// the source says it (COCO's `area`: the segment's, not the box's); absent:
/// the box's own area.
inline constexpr char box_area[] = "box_area";
/// What a Detector's decode gives, per sample, highest score first: ragged
/// float {n, 4} boxes (in the input's pixels from decode; the host maps them
/// to the original image's through input_from_original before meters and
/// predict see them), ragged int64 {n} classes, ragged float {n} scores.
inline constexpr char detected_boxes[] = "detected_boxes";
inline constexpr char detected_labels[] = "detected_labels";
inline constexpr char detected_scores[] = "detected_scores";
}  // namespace field_name

/// Collates samples into a batch: inputs and targets stacked, each field by
/// its kind (above). Every sample must carry the same names with the same
/// kinds, dtypes and trailing shapes; otherwise ConfigError naming the field
/// and the two samples (`indices[k]` is sample k's index).
FieldBatch collate(std::vector<FieldExample> samples, std::vector<int64_t> indices);
/// The fields part of collate(): for a dataset whose get_batch makes the
/// batch's tensors (decoding on a GPU) and whose fields come separately.
Fields collate_fields(const std::vector<Fields>& samples, const std::vector<int64_t>& indices);

/// Sample k's part of a batch's field: a ragged field's rows of sample k, a
/// meta field's row k, a dense field's row k (with its padding).
at::Tensor sample_values(const Field& field, int64_t k);

/// Boxes {n, 4} (x1, y1, x2, y2) through a 2x3 affine map: each box's four
/// corners mapped, their bounds taken (not clipped). float64.
at::Tensor map_boxes(const at::Tensor& boxes, const at::Tensor& affine);
/// Boxes in a sample's input pixels back in its original image's, through
/// the inverse of its `input_from_original` {2, 3}.
at::Tensor boxes_to_original(const at::Tensor& boxes, const at::Tensor& input_from_original);

/// Since SDK 1.5, optional: a dataset whose samples carry fields. The host
/// then reads batches through get_batch_with_fields (and, to find a bad
/// record, samples through get_with_fields) rather than get_batch and
/// get_seeded; their examples must be the same. Thread-safety as Dataset's.
///
/// Example:
///   class Boxes : public trainyard::Dataset, public trainyard::FieldDataset {
///     trainyard::FieldExample get_with_fields(int64_t i, uint64_t seed) const override;
///     ...
///   };
class FieldDataset {
 public:
  virtual ~FieldDataset();
  /// Sample `index` under seed `seed`, with its fields.
  virtual FieldExample get_with_fields(int64_t index, uint64_t seed) const = 0;
  /// Several samples at once; the default collates get_with_fields. A
  /// BadRecord makes the host retry sample by sample.
  virtual FieldBatch get_batch_with_fields(const std::vector<int64_t>& indices,
                                           const std::vector<uint64_t>& seeds) const;
};

/// Since SDK 1.5, optional: a loss that reads the batch's fields (a
/// detector's loss reads boxes). The host calls this instead of
/// Loss::compute; `fields` is empty for a batch without fields (an
/// additional_override that made its own batches), which such a loss may
/// refuse with a ConfigError naming the field it needs.
class FieldLoss {
 public:
  virtual ~FieldLoss();
  virtual at::Tensor compute_with_fields(const at::Tensor& output, const Batch& batch, const Fields& fields) = 0;
};

/// Since SDK 1.5, optional: a network whose output encodes detections (a
/// CenterNet's heatmaps, an anchor head's offsets). Wherever meters that read
/// fields measure its output (and in `trainyard predict`), the host calls
/// decode() once per batch, maps the boxes to each sample's original image
/// (through its input_from_original, where the batch has one) and adds the
/// three field_name::detected_* fields to the batch's fields.
///
/// Example:
///   trainyard::Fields decode(const at::Tensor& out, const trainyard::Batch& b) const override {
///     // per sample: peaks of the heatmaps, their boxes in input pixels, highest score first
///     return {{trainyard::field_name::detected_boxes, {trainyard::FieldKind::ragged, boxes, counts}}, ...};
///   }
class Detector {
 public:
  virtual ~Detector();
  /// The detections of `output` (the network's forward of `batch`): ragged
  /// detected_boxes (input pixels), detected_labels and detected_scores, with
  /// counts int64 {B} on the CPU, highest score first in each sample.
  virtual Fields decode(const at::Tensor& output, const Batch& batch) const = 0;
  /// Detections below this score are not decoded (and not written by predict).
  virtual double score_threshold() const = 0;
};

/// Since SDK 1.5, optional: a meter that reads the batch's fields (mAP reads
/// boxes). The host calls this instead of Meter::update.
class FieldMeter {
 public:
  virtual ~FieldMeter();
  virtual void update_with_fields(const MeterInput& input, const Fields& fields) = 0;
};

/// Since SDK 1.5 (added within 1.5), optional: a dataset whose classes and
/// images have ids in the file it reads (COCO's category and image ids).
/// `trainyard predict` writes a detector's results with them (a COCO
/// results.json that pycocotools' loadRes reads against that file) and
/// `trainyard export` writes the class ids beside the weights. A dataset
/// without it: class k is id k, images are numbered in predict's order.
///
/// Example:
///   std::vector<int64_t> class_ids() const override { return category_ids_; }  // sorted COCO ids
///   int64_t image_id(const std::string& path) const override { ... }          // -1: not in the file
class AnnotationIds {
 public:
  virtual ~AnnotationIds();
  /// Class k's id in the source, for k = 0 to num_classes - 1.
  virtual std::vector<int64_t> class_ids() const = 0;
  /// The id of the image file at `path` (absolute, as predict finds it) in
  /// the source, or -1 when the source has no such image.
  virtual int64_t image_id(const std::string& path) const = 0;
};

}  // namespace trainyard
