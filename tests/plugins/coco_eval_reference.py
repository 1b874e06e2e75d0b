"""COCOeval's 12 box statistics for a ground-truth JSON and a results JSON.

Prints two lines of 12 numbers: pycocotools 2.0.11's COCOeval, then
faster-coco-eval's COCOeval_faster, on the same files (iouType "bbox").
"""
import contextlib
import io
import json
import sys

from faster_coco_eval import COCO as FasterCOCO
from faster_coco_eval import COCOeval_faster
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval


def stats(coco_class, eval_class, truth, results):
    with contextlib.redirect_stdout(io.StringIO()):  # their progress lines
        ground = coco_class(truth)
        found = ground.loadRes(results)
        e = eval_class(ground, found, "bbox")
        e.evaluate()
        e.accumulate()
        e.summarize()
    return [float(s) for s in e.stats]


def main():
    truth, results = sys.argv[1], sys.argv[2]
    print(json.dumps(stats(COCO, COCOeval, truth, results)))
    print(json.dumps(stats(FasterCOCO, COCOeval_faster, truth, results)))


if __name__ == "__main__":
    main()
