#pragma once
/// trainyard's record format for packed datasets (LMDB values), versions 1
/// and 2 (2: the records hold boxes, label kind 2).
/// Documented byte by byte in docs/lmdb-format.md. No LibTorch, no OpenCV:
/// anyone can write or read it.
///
/// Example:
///   trainyard::Record r;
///   r.images.push_back({trainyard::ImageEncoding::png, 28, 28, 1, png_bytes});
///   r.labels.push_back(trainyard::Label::class_index(3));
///   std::string value = trainyard::encode_record(r);
///   trainyard::Record back = trainyard::decode_record(value.data(), value.size());

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace trainyard {

/// The version of records without boxes, which every reader knows.
inline constexpr uint8_t kRecordFormatVersion = 1;
/// Since SDK 1.5 (helpers, additive): records that hold a `boxes` label, and
/// the metadata of a database of them, say version 2, so that a reader of an
/// older SDK refuses them instead of reading boxes as a vector of floats.
inline constexpr uint8_t kBoxesRecordFormatVersion = 2;
/// A `boxes` label's floats per box: x1, y1, x2, y2 (the stored image's
/// pixels, trainyard/fields.h's convention), class (0 to K-1), crowd (0 or
/// 1), area (COCO's area of the object, in the stored image's pixels).
inline constexpr size_t kBoxLabelValues = 7;
/// The largest image side a record may declare (decode_record refuses more).
inline constexpr uint32_t kMaxImageSide = 16384;

enum class ImageEncoding : uint8_t { raw = 0, png = 1, jpeg = 2 };
const char* encoding_name(ImageEncoding encoding);

struct EncodedImage {
  ImageEncoding encoding = ImageEncoding::raw;
  uint32_t rows = 0, cols = 0;  ///< of the decoded image
  uint8_t channels = 1;         ///< of the decoded image (1 gray, 3 BGR)
  std::string bytes;            ///< raw: rows*cols*channels uint8 (HWC); else the encoded file
};

struct Label {
  /// boxes: since format version 2; `values` holds kBoxLabelValues floats per box.
  enum class Kind : uint8_t { class_index = 0, vector = 1, boxes = 2 } kind = Kind::class_index;
  int64_t index = 0;
  std::vector<float> values;
  static Label class_index(int64_t i) { return {Kind::class_index, i, {}}; }
  static Label vector(std::vector<float> v) { return {Kind::vector, 0, std::move(v)}; }
  static Label boxes(std::vector<float> v) { return {Kind::boxes, 0, std::move(v)}; }
};

struct Record {
  std::vector<EncodedImage> images;
  std::vector<Label> labels;
  std::string id;
};

/// Version 2 when a label is `boxes`, else version 1.
std::string encode_record(const Record& record);
/// Throws trainyard::BadRecord with the reason when the bytes are not a
/// complete version-1 or version-2 record (a `boxes` label in a version-1
/// record, or one whose length is not a multiple of kBoxLabelValues, is
/// damage too).
Record decode_record(const void* data, size_t size);

/// The key of the i-th record: 10 decimal digits, so byte order is insertion order.
std::string record_key(int64_t index);
/// The key of the metadata entry (sorts after every record key).
inline constexpr const char* kMetadataKey = "__trainyard_metadata__";

/// The metadata entry: one "name=value" line each, see docs/lmdb-format.md.
struct DatasetMetadata {
  int64_t format_version = kRecordFormatVersion;  ///< kBoxesRecordFormatVersion: the records hold boxes
  int64_t count = 0;
  int64_t input_images = 1;  ///< the first input_images images of a record are inputs, the rest targets
  std::vector<std::string> class_names;
  std::vector<std::string> image_shapes;  ///< "HxWxC" per image slot
  std::string source;                     ///< what it was converted from
};
std::string encode_metadata(const DatasetMetadata& metadata);
/// Throws trainyard::Error with the reason for a malformed entry or a
/// format version other than 1 and 2.
DatasetMetadata decode_metadata(const std::string& text);

}  // namespace trainyard
