"""How well can the scene set's garments be named at all? A probe behind the
scene targets in docs/performance.md (issue 51), not a speed benchmark.

Each item of the scene set (scripts/make-scene-set.sh) is cut out as a 64x64
window centred on its COCO box, so the network is told where every item is
and only has to name it: localization is given away. The classifier is the
scene U-Net's encoder (plugins/unet at depth 4, width 16: two 3x3
convolutions with batch norm per level, max-pooling between) with a global
average pool and a linear layer; Adam at LR with a cosine schedule over
EPOCHS, batch 32, horizontal flips, channels_last, 2 threads. Prints the
CPU, then train and test accuracy after each epoch over the test split's
items (other Fashion-MNIST items, other photographs), and at the end the
test mIoU of a segmentation that has every item's exact mask and paints it
with the class this classifier names (background exact): the most a
network that names items as well as this one can score, macro over the 11
classes as the miou meter counts (torchmetrics' macro Jaccard index, the
reference that meter is tested against; masks decoded by pycocotools).

With HELD_OUT=1 the last tenth of the training scenes is kept out of
training, and accuracy on their items (training's photographs, other
Fashion-MNIST items) is printed too: if it is well above the test split's,
the names fail to carry over to other photographs rather than to other
items.

usage: [HELD_OUT=1] scene_item_naming.py DATA [EPOCHS] [LR]
"""
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image
from pycocotools import mask as coco_mask
from torchmetrics.functional.classification import multiclass_jaccard_index

WINDOW, BATCH, DEPTH, WIDTH = 64, 32, 4, 16


def print_cpu():
    """The header every benchmark prints (scripts/bench/cpu-header.sh)."""
    here = Path(__file__).resolve().parent
    subprocess.run(["bash", "-c", f'source "{here}/cpu-header.sh" && bench_cpu_header "{here.parent.parent}/build/bin/trainyard"'],
                   check=True)


def items(root, split):
    """Every item's window and class (0-9) from SPLIT's COCO file, and its annotation."""
    coco = json.loads((root / split / "instances.json").read_text())
    files = {image["id"]: image["file_name"] for image in coco["images"]}
    half = WINDOW // 2
    padded, windows, classes = {}, [], []
    for a in coco["annotations"]:
        if a["image_id"] not in padded:
            image = np.asarray(Image.open(root / split / files[a["image_id"]]).convert("RGB"))
            padded[a["image_id"]] = np.pad(image, ((half, half), (half, half), (0, 0)))
        x, y, w, h = a["bbox"]
        cx, cy = x + w // 2, y + h // 2
        windows.append(padded[a["image_id"]][cy:cy + WINDOW, cx:cx + WINDOW])
        classes.append(a["category_id"] - 1)
    x = torch.from_numpy(np.stack(windows)).permute(0, 3, 1, 2).float() / 255
    return (x - 0.4) / 0.25, torch.tensor(classes), coco["annotations"]


def painted_miou(root, annotations, named):
    """Test mIoU when each item's exact mask is painted with its named class."""
    truth, painted = {}, {}
    for a, name in zip(annotations, named.tolist()):
        image_id = a["image_id"]
        if image_id not in truth:
            truth[image_id] = np.asarray(Image.open(root / "test" / "masks" / f"{image_id - 1:06d}.png"))
            painted[image_id] = np.zeros_like(truth[image_id])
        height, width = a["segmentation"]["size"]
        visible = coco_mask.decode(coco_mask.frPyObjects(a["segmentation"], height, width)).astype(bool)
        painted[image_id][visible] = 1 + name
    ids = sorted(truth)
    return multiclass_jaccard_index(torch.from_numpy(np.stack([painted[i] for i in ids])).long(),
                                    torch.from_numpy(np.stack([truth[i] for i in ids])).long(),
                                    num_classes=11, average="macro").item()


def level(inputs, outputs):
    return nn.Sequential(
        nn.Conv2d(inputs, outputs, 3, padding=1, bias=False), nn.BatchNorm2d(outputs), nn.ReLU(),
        nn.Conv2d(outputs, outputs, 3, padding=1, bias=False), nn.BatchNorm2d(outputs), nn.ReLU())


def encoder_classifier():
    layers, channels = [], 3
    for d in range(DEPTH):
        layers += [level(channels, WIDTH << d), nn.MaxPool2d(2)]
        channels = WIDTH << d
    layers += [level(channels, WIDTH << DEPTH), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(WIDTH << DEPTH, 10)]
    return nn.Sequential(*layers).to(memory_format=torch.channels_last)


def name(net, x):
    net.eval()
    with torch.no_grad():
        return torch.cat([net(x[i:i + 200].contiguous(memory_format=torch.channels_last)).argmax(1)
                          for i in range(0, len(x), 200)])


def main():
    root = Path(sys.argv[1])
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    lr = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-3
    torch.set_num_threads(2)
    torch.manual_seed(0)
    print_cpu()
    print(f"torch {torch.__version__}", flush=True)
    train_x, train_y, train_annotations = items(root, "train")
    test_x, test_y, test_annotations = items(root, "test")
    held_x, held_y = train_x[:0], train_y[:0]
    if os.environ.get("HELD_OUT") == "1":
        last = max(a["image_id"] for a in train_annotations)
        held = torch.tensor([a["image_id"] > last * 9 // 10 for a in train_annotations])
        held_x, held_y, train_x, train_y = train_x[held], train_y[held], train_x[~held], train_y[~held]
    print(f"items: {len(train_y)} train, {len(held_y)} held out, {len(test_y)} test; "
          f"epochs {epochs}, Adam {lr}, cosine", flush=True)
    net = encoder_classifier()
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    steps, step, start = epochs * math.ceil(len(train_y) / BATCH), 0, time.perf_counter()
    for epoch in range(1, epochs + 1):
        net.train()
        order, right = torch.randperm(len(train_y)), 0
        for first in range(0, len(order), BATCH):
            batch = order[first:first + BATCH]
            x, y = train_x[batch], train_y[batch]
            x = torch.where(torch.rand(len(x), 1, 1, 1) < 0.5, x.flip(3), x)
            for group in optimizer.param_groups:
                group["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / steps))
            scores = net(x.contiguous(memory_format=torch.channels_last))
            loss = F.cross_entropy(scores, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            right += (scores.argmax(1) == y).sum().item()
        named = name(net, test_x)
        held = f"held_out_accuracy {(name(net, held_x) == held_y).float().mean():.3f} " if len(held_y) else ""
        print(f"epoch {epoch} train_accuracy {right / len(train_y):.3f} {held}"
              f"test_accuracy {(named == test_y).float().mean():.3f} seconds {time.perf_counter() - start:.0f}",
              flush=True)
    print(f"test mIoU, exact masks painted with the named classes: {painted_miou(root, test_annotations, named):.3f}; "
          f"with the true classes: {painted_miou(root, test_annotations, test_y):.3f}", flush=True)


if __name__ == "__main__":
    main()
