// meters: loss and top-k accuracy (Playground's train/test top-1 and top-5),
// and a confusion matrix with a per-class report (structured results).
#include <trainyard/plugin.h>

#include "meters.h"

namespace {

void register_components(trainyard::Registrar& r) {
  r.add_meter("loss", "mean loss per sample (reports: loss)", meters::loss_schema(),
              [](const trainyard::Options& o, const trainyard::Context&) { return meters::make_loss(o); });
  r.add_meter("topk_accuracy", "fraction of samples whose class is among the k top outputs (reports: accuracy_topK)",
              meters::topk_schema(), meters::make_topk);
  r.add_meter("confusion_matrix",
              "counts of (true class, predicted class) (reports: mean_class_recall; results: confusion_matrix and "
              "per_class tables, written to RUN_DIR/meters/ at each test)",
              meters::confusion_schema(), meters::make_confusion);
  r.add_meter("miou",
              "mean intersection over union over the phase's confusion matrix, dense ([B, C, H, W] against "
              "[B, H, W]) or not, with ignore_index (reports: miou, pixel_accuracy; results: iou_per_class)",
              meters::miou_schema(), meters::make_miou);
  r.add_meter("coco_map",
              "COCO box mAP: the 12 statistics of pycocotools' COCOeval over a test pass, of a detector's decoded "
              "detections against a detection dataset's boxes, in original-image pixels (reports: ap, ap50, ap75, "
              "ap_small, ap_medium, ap_large, ar1, ar10, ar100, ar_small, ar_medium, ar_large)",
              meters::coco_map_schema(), meters::make_coco_map);
}

}  // namespace

TRAINYARD_PLUGIN("meters", "1.3.0", "loss, top-k accuracy, confusion matrix, mIoU and COCO mAP meters",
                 register_components)
