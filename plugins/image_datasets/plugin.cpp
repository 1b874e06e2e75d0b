// image_datasets: images from LMDB (trainyard's record format), from class
// folders, from WebDataset tar shards, from a CSV, or with COCO annotations,
// all with the same transforms. Classes, masks (target: mask) and, from
// COCO, LMDB and shards, boxes (target: boxes: annotated_dataset.h).
#include <trainyard/plugin.h>
#include <opencv2/core/utility.hpp>

#include "image_dataset.h"

namespace {

// The dataset with its `decode` option applied for the run's device.
std::shared_ptr<trainyard::Dataset> chosen(std::shared_ptr<trainyard::Dataset> dataset,
                                           const trainyard::Context& context) {
  if (auto* images = dynamic_cast<image_datasets::ImageDataset*>(dataset.get())) images->choose_decoder(context);
  return dataset;
}

template <class Make>
trainyard::Factory<trainyard::Dataset> factory(Make make) {
  return [make](const trainyard::Options& o, const trainyard::Context& context) {
    // The host's decode threads are the parallelism; OpenCV's own pool would
    // oversubscribe the cores.
    cv::setNumThreads(0);
    return chosen(make(o), context);
  };
}

void register_components(trainyard::Registrar& r) {
  r.add_dataset("lmdb", "records from an LMDB written by 'trainyard convert', decoded and augmented with OpenCV",
                image_datasets::lmdb_schema(), factory(image_datasets::make_lmdb));
  r.add_dataset("image_folder", "image files in one sub-folder per class", image_datasets::image_folder_schema(),
                factory(image_datasets::make_image_folder));
  r.add_dataset("webdataset",
                "tar shards in the WebDataset convention (KEY.jpg|png + KEY.cls|json, KEY.mask.png or KEY.boxes.json): "
                "local files indexed and read by offset, or pipe:COMMAND streams with shard shuffling and a shuffle "
                "buffer",
                image_datasets::webdataset_schema(), [](const trainyard::Options& o, const trainyard::Context& c) {
                  cv::setNumThreads(0);
                  return chosen(image_datasets::make_webdataset(o, c), c);
                });
  r.add_dataset("csv", "image files listed in a CSV of path,label lines", image_datasets::csv_schema(),
                factory(image_datasets::make_csv));
  r.add_dataset("coco",
                "images with COCO instances annotations (JSON): with target: mask, each image's polygons and RLE "
                "regions as one mask of class ids, crowd regions ignored; with target: boxes, its boxes as the "
                "sample's fields",
                image_datasets::coco_schema(), factory(image_datasets::make_coco));
}

}  // namespace

TRAINYARD_PLUGIN("image_datasets", "1.4.0",
                 "LMDB, image-folder, WebDataset-shard, CSV and COCO image datasets with OpenCV transforms",
                 register_components)
