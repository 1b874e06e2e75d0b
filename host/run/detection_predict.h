#pragma once
// `trainyard predict` for a detector (SDK 1.5 Detector): each image's
// detections in its own pixels, as a COCO results file that pycocotools'
// loadRes reads, beside a CSV (run/model.cpp calls it).
#include <cstdint>
#include <vector>

#include "run/loaded_model.h"
#include "run/mode_requests.h"

namespace trainyard::host {

/// Class k's category id in results files: the evaluation dataset's (SDK
/// 1.5 AnnotationIds, checked: one per class), else k.
std::vector<int64_t> category_ids(const LoadedModel& m);

/// Writes request.output as a new folder (it must not exist):
///   results.json     [{image_id, category_id, bbox: [x, y, w, h], score}], COCO's results format
///   images.json      a COCO file of the images (id, file_name, height, width) and categories, no
///                    annotations: what loadRes needs for images that no annotation file lists
///   predictions.csv  index, source, image_id, class, category_id, score, x1, y1, x2, y2
/// Boxes are the decode's, mapped from the input to the original image
/// through the preprocessing (resize, center crop). Image and category ids
/// are the evaluation dataset's where it has them (SDK 1.5 AnnotationIds:
/// the coco dataset's) and knows every input image; otherwise images are
/// numbered 1 to N in path order and class k is category k. Image files only.
/// Returns the images read.
int64_t predict_detections(const LoadedModel& m, InputSet& input, const PredictRequest& request);

}  // namespace trainyard::host
