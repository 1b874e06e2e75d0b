#pragma once
// convert's input side (data/convert.h): the samples a source names (an
// image folder, a CSV of files and labels, idx arrays, parallel folders of
// images and masks, or a COCO instances file) and each sample's images as
// they are stored in a record (encoded, or kept as they are).
#include <cstdint>
#include <string>
#include <vector>

#include "data/convert_options.h"
#include "trainyard/coco.h"
#include "trainyard/record.h"

namespace trainyard::host {

// One sample to convert: where its images come from, and its label.
struct Item {
  std::vector<std::string> files;  ///< image files (inputs then targets), or empty for idx
  int64_t idx_index = -1;          ///< row in the idx arrays
  int64_t label = -1;              ///< class index, -1 for none
  std::string id;
  int64_t coco_image = -1;  ///< coco: the image whose annotations are painted into its mask, or whose boxes it holds
};

/// A source's samples, in the order read, and what the records say of them.
struct Source {
  std::vector<Item> items;
  std::vector<std::string> class_names;
  int64_t input_images = 1;
  std::string description;
  // idx: the arrays in memory
  std::vector<uint8_t> idx_pixels;
  int idx_rows = 0, idx_cols = 0;
  // coco: the images and their annotations, and the crowd regions' value in the masks
  std::vector<coco::Image> coco_images;
  int coco_crowd = 255;
  bool coco_boxes = false;  ///< --coco-target boxes: records hold boxes, not masks
};

/// The samples `o`'s source names, checked (folders and files exist, labels
/// parse, idx arrays agree). Throws ConfigError naming the file.
Source read_source(const ConvertOptions& o);

/// A sample's images as stored: the idx row's pixels, or each file, encoded
/// (or kept as it is, with --encoding keep).
std::vector<EncodedImage> encode_images(const Source& s, const Item& item, const ConvertOptions& o);

/// --coco-target boxes: the item's COCO boxes as a record's `boxes` label
/// (kBoxLabelValues floats each), scaled from the JSON's image size to the
/// stored image's `stored_rows` x `stored_cols` (--resize), area too.
Label box_label(const Source& s, const Item& item, uint32_t stored_rows, uint32_t stored_cols);

}  // namespace trainyard::host
