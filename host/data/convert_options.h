#pragma once
// What `trainyard convert` is asked (data/convert.h): the source, the
// output and how records are encoded. Apart from convert.h so that its input
// side (data/convert_source.h) reads it without including convert's unit.
#include <cstdint>
#include <string>
#include <vector>

namespace trainyard::host {

struct ConvertOptions {
  std::string from;                  ///< folder | csv | idx | parallel | coco
  std::vector<std::string> inputs;   ///< folder: one root; csv, coco: one file; parallel: input folders
  std::vector<std::string> targets;  ///< parallel: target folders
  std::string images, labels;        ///< idx files; coco: images is the folder of the JSON's file_names
  std::string coco_target = "mask";  ///< coco: mask (painted masks) | boxes (each image's boxes, format version 2)
  std::string output;
  std::string to = "lmdb";         ///< lmdb | webdataset
  int64_t shard_size = 1000;       ///< webdataset: samples per shard
  std::string encoding = "png";    ///< png | jpeg | raw
  int quality = 95;                ///< JPEG quality
  int resize_h = 0, resize_w = 0;  ///< resize on the way in; 0: keep
  bool shuffle = false;
  uint64_t seed = 0;
  double test_fraction = 0;  ///< > 0: OUTPUT/train and OUTPUT/test
  int64_t limit = 0;         ///< convert only the first N samples
  bool overwrite = false;
  bool progress = true;
};

}  // namespace trainyard::host
