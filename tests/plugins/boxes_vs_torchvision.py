"""Checks trainyard's boxes against torchvision v2's functional ops.

Each line of the cases file (written by BoxGeometry.ThousandSeedsAgreeWithTorchvisionV2)
holds one seed's drawn geometry (the resize, the crop, the flips and OpenCV's
2x3 rotation-and-translation matrix), the boxes in original pixels and the
boxes trainyard made. The same parameters go through torchvision's ops on
tv_tensors.BoundingBoxes (XYXY), clamped to the sample after the flips
(the crop keeps nothing outside it) and after the rotation and translation;
every coordinate must agree within 1e-3 px. Prints
"N cases" and exits 0, or names the first case that differs and exits 1.
"""
import json
import math
import sys

import torch
from torchvision import tv_tensors
from torchvision.transforms.v2 import functional as F


def boxes_like(values, canvas):
    return tv_tensors.BoundingBoxes(torch.tensor(values, dtype=torch.float64), format="XYXY",
                                    canvas_size=tuple(canvas), clamping_mode=None)


def torchvision_boxes(case):
    b = boxes_like(case["boxes"], case["full"])
    if case["resized"] != case["full"]:
        b = F.resize(b, case["resized"])
    top, left, height, width = case["crop"]
    b = F.crop(b, top, left, height, width)
    if [height, width] != case["out"]:  # random_resized: the crop resized to crop_size
        b = F.resize(b, case["out"])
    if case["hflip"]:
        b = F.horizontal_flip(b)
    if case["vflip"]:
        b = F.vertical_flip(b)
    # The crop keeps nothing outside it: clamped before the motion, as
    # torchvision's default (soft) clamping would after the crop.
    b = F.clamp_bounding_boxes(tv_tensors.wrap(b, like=b, clamping_mode="hard"))
    b = tv_tensors.wrap(b, like=b, clamping_mode=None)
    if case["cv_affine"] is not None:
        # OpenCV's getRotationMatrix2D(centre (w/2, h/2) in pixel-centre
        # coordinates, angle counter-clockwise) plus a translation: the same
        # rotation is torchvision's clockwise angle -a about (w/2 + 0.5,
        # h/2 + 0.5) in pixel-edge coordinates, then the translation.
        a00, a01, a02, a10, a11, a12 = case["cv_affine"]
        h, w = case["out"]
        angle = math.degrees(math.atan2(a01, a00))
        cx, cy = w / 2, h / 2
        dx = a02 - ((1 - a00) * cx - a01 * cy)
        dy = a12 - (a01 * cx + (1 - a00) * cy)
        b = F.affine(b, angle=-angle, translate=[dx, dy], scale=1.0, shear=[0.0, 0.0], center=[cx + 0.5, cy + 0.5])
    b = F.clamp_bounding_boxes(tv_tensors.wrap(b, like=b, clamping_mode="hard"))
    return b.as_subclass(torch.Tensor)


def main():
    cases = [json.loads(line) for line in open(sys.argv[1])]
    worst = 0.0
    for case in cases:
        theirs = torchvision_boxes(case)
        ours = torch.tensor(case["ours"], dtype=torch.float64)
        difference = (theirs - ours).abs().max().item()
        worst = max(worst, difference)
        if difference > 1e-3:
            print(f"seed {case['seed']}: ours {ours.tolist()}, torchvision {theirs.tolist()} "
                  f"(differ by {difference:.6g} px)")
            return 1
    print(f"{len(cases)} cases, largest difference {worst:.3g} px")
    return 0


if __name__ == "__main__":
    sys.exit(main())
