"""The plain PyTorch side of scripts/bench-dense.sh's detector rows:
experiments/recipes/scene_centernet.yaml written as a PyTorch user writes it
today: the same CenterNet (plugins/centernet: a U-Net-shaped encoder and
decoder to stride 4, three heads), data (the scene set's COCO JSON and JPEGs
decoded per sample by torchvision.io), augmentation (torchvision's v2
transforms on tv_tensors: the boxes follow the image's flip), loss (focal
loss on Gaussian heatmaps, L1 on size and offset), optimizer, batch,
precision and memory format (channels_last), a DataLoader of WORKERS
processes; the test split measured with pycocotools' COCOeval after each
epoch, until AP50 reaches the target or the epochs run out.

usage: detect_reference.py DATA THREADS WORKERS TARGET EPOCHS
prints one line per epoch: "epoch N test_ap50 A train_images_per_sec R
seconds S test_ap B" (S since the script started), then "reached A at
epoch N" or "missed: best A".
"""
import contextlib
import io
import json
import math
import sys
import time

START = time.perf_counter()
import torch  # noqa: E402  (the import is part of the measured time, as trainyard's start-up is)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from pathlib import Path  # noqa: E402
from pycocotools.coco import COCO  # noqa: E402
from pycocotools.cocoeval import COCOeval  # noqa: E402
from torchvision import tv_tensors  # noqa: E402
from torchvision.io import decode_jpeg, read_file  # noqa: E402
from torchvision.transforms import v2  # noqa: E402

from dense_reference import block  # noqa: E402  (the U-Net's level: two 3x3 convolutions, batch norm, ReLU)

MEAN, STD = [0.43, 0.34, 0.31], [0.29, 0.23, 0.23]  # as the recipe says
DEPTH, WIDTH, HEAD, BATCH, LR, STRIDE = 4, 16, 64, 16, 0.002, 4
SIZE_WEIGHT, OFFSET_WEIGHT, MIN_OVERLAP, MAX_DETECTIONS, THRESHOLD = 0.1, 1.0, 0.7, 100, 0.01


class CenterNet(nn.Module):
    """plugins/centernet/network.cpp: the encoder, the decoder back to stride 4, three heads."""

    def __init__(self, classes):
        super().__init__()
        self.down, channels, width = nn.ModuleList(), 3, WIDTH
        for _ in range(DEPTH):
            self.down.append(block(channels, width))
            channels, width = width, width * 2
        self.bottom = block(channels, width)
        self.up, self.merge = nn.ModuleList(), nn.ModuleList()
        for _ in range(DEPTH - 2):
            self.up.append(nn.ConvTranspose2d(width, width // 2, 2, stride=2))
            self.merge.append(block(width, width // 2))
            width //= 2

        def head(out, bias):
            last = nn.Conv2d(HEAD, out, 1)
            nn.init.constant_(last.bias, bias)
            return nn.Sequential(nn.Conv2d(width, HEAD, 3, padding=1), nn.ReLU(), last)

        self.heat, self.size, self.offset = head(classes, -2.19), head(2, 0.0), head(2, 0.0)

    def forward(self, x):
        skips = []
        for level in self.down:
            x = level(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, merge in zip(self.up, self.merge):
            x = merge(torch.cat([skips.pop(), up(x)], 1))
        return torch.cat([self.heat(x), self.size(x), self.offset(x)], 1)


def peak_radius(height, width):
    def root(a, b, c):
        return (b + math.sqrt(max(0.0, b * b - 4 * a * c))) / 2
    total, area, m = height + width, height * width, MIN_OVERLAP
    return min(root(1, total, area * (1 - m) / (1 + m)), root(4, 2 * total, (1 - m) * area),
               root(4 * m, -2 * m * total, (m - 1) * area))


def centernet_loss(output, targets):
    b, k, rows, cols = output.shape[0], output.shape[1] - 4, output.shape[2], output.shape[3]
    heat = torch.zeros(b, k, rows, cols)
    cells, wanted = [], []
    for i, t in enumerate(targets):
        for (x1, y1, x2, y2), label in zip(t["boxes"].tolist(), t["labels"].tolist()):
            w, h = (x2 - x1) / STRIDE, (y2 - y1) / STRIDE
            cx, cy = (x1 + x2) / 2 / STRIDE, (y1 + y2) / 2 / STRIDE
            col, row = min(max(int(math.floor(cx)), 0), cols - 1), min(max(int(math.floor(cy)), 0), rows - 1)
            r = max(0, int(peak_radius(h, w)))
            sigma = (2 * r + 1) / 6
            ys = torch.arange(max(0, row - r), min(rows, row + r + 1))
            xs = torch.arange(max(0, col - r), min(cols, col + r + 1))
            g = torch.exp(-((ys[:, None] - row) ** 2 + (xs[None, :] - col) ** 2).float() / (2 * sigma * sigma))
            view = heat[i, label, ys[0]:ys[-1] + 1, xs[0]:xs[-1] + 1]
            torch.maximum(view, g, out=view)
            cells.append((i, row, col))
            wanted.append([w, h, cx - col, cy - row])
    p = output[:, :k].float().sigmoid().clamp(1e-4, 1 - 1e-4)
    peak = heat.eq(1).float()
    objects = max(1, len(cells))
    focal = -(peak * (1 - p) ** 2 * p.log() + (1 - peak) * (1 - heat) ** 4 * p ** 2 * (1 - p).log()).sum() / objects
    if not cells:
        return focal
    index = torch.tensor(cells)
    predicted = output[index[:, 0], k:, index[:, 1], index[:, 2]].float()
    l1 = (predicted - torch.tensor(wanted)).abs()
    return focal + SIZE_WEIGHT * l1[:, :2].sum() / objects + OFFSET_WEIGHT * l1[:, 2:].sum() / objects


def decode(output):
    b, k, rows, cols = output.shape[0], output.shape[1] - 4, output.shape[2], output.shape[3]
    heat = output[:, :k].sigmoid()
    peaks = heat * heat.eq(F.max_pool2d(heat, 3, 1, 1))
    scores, where = peaks.reshape(b, -1).topk(min(MAX_DETECTIONS, k * rows * cols), 1)
    label, cell = where // (rows * cols), where % (rows * cols)
    row, col = cell // cols, cell % cols
    regress = output[:, k:].reshape(b, 4, -1).gather(2, cell[:, None, :].expand(-1, 4, -1))
    cx, cy = (col + regress[:, 2]) * STRIDE, (row + regress[:, 3]) * STRIDE
    half_w, half_h = regress[:, 0].clamp_min(0) * STRIDE / 2, regress[:, 1].clamp_min(0) * STRIDE / 2
    return torch.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], 2), label, scores


class Scenes(torch.utils.data.Dataset):
    def __init__(self, folder, transform):
        coco = json.loads((Path(folder) / "instances.json").read_text())
        self.categories = sorted(c["id"] for c in coco["categories"])
        index = {c: i for i, c in enumerate(self.categories)}
        self.images = coco["images"]
        self.boxes = {i["id"]: [] for i in self.images}
        for a in coco["annotations"]:
            x, y, w, h = a["bbox"]
            self.boxes[a["image_id"]].append(([x, y, x + w, y + h], index[a["category_id"]]))
        self.folder, self.transform = Path(folder), transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        info = self.images[i]
        image = tv_tensors.Image(decode_jpeg(read_file(str(self.folder / info["file_name"]))))
        found = self.boxes[info["id"]]
        boxes = tv_tensors.BoundingBoxes([b for b, _ in found] or torch.zeros(0, 4), format="XYXY",
                                         canvas_size=image.shape[-2:])
        image, target = self.transform(image, {"boxes": boxes, "labels": torch.tensor([c for _, c in found],
                                                                                     dtype=torch.long)})
        return image, target, info["id"]


def collate(samples):
    return torch.stack([s[0] for s in samples]), [s[1] for s in samples], [s[2] for s in samples]


def evaluate(net, test, truth):
    results = []
    with torch.no_grad():
        loader = torch.utils.data.DataLoader(test, batch_size=50, collate_fn=collate)
        for images, _, ids in loader:
            boxes, labels, scores = decode(net(images.contiguous(memory_format=torch.channels_last)))
            for b, l, s, image_id in zip(boxes, labels, scores, ids):
                keep = s >= THRESHOLD
                for (x1, y1, x2, y2), c, v in zip(b[keep].tolist(), l[keep].tolist(), s[keep].tolist()):
                    results.append({"image_id": image_id, "category_id": test.categories[c],
                                    "bbox": [x1, y1, x2 - x1, y2 - y1], "score": v})
    if not results:
        return 0.0, 0.0
    with contextlib.redirect_stdout(io.StringIO()):
        e = COCOeval(truth, truth.loadRes(results), "bbox")
        e.evaluate()
        e.accumulate()
        e.summarize()
    return e.stats[1], e.stats[0]


def main(data, threads, workers, target, epochs):
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    to_input = [v2.ToDtype({tv_tensors.Image: torch.float32, "others": None}, scale=True), v2.Normalize(MEAN, STD)]
    train = Scenes(f"{data}/train", v2.Compose([v2.RandomHorizontalFlip(), *to_input]))
    test = Scenes(f"{data}/test", v2.Compose(to_input))
    with contextlib.redirect_stdout(io.StringIO()):
        truth = COCO(f"{data}/test/instances.json")
    loader = torch.utils.data.DataLoader(train, batch_size=BATCH, shuffle=True, num_workers=workers,
                                         persistent_workers=workers > 0, collate_fn=collate)
    net = CenterNet(len(train.categories)).to(memory_format=torch.channels_last)  # the recipe's memory_format
    optimizer = torch.optim.Adam(net.parameters(), lr=LR)
    steps = epochs * len(loader)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    best = 0.0
    for epoch in range(1, epochs + 1):
        net.train()
        seen, t0 = 0, time.perf_counter()
        for images, targets, _ in loader:
            loss = centernet_loss(net(images.contiguous(memory_format=torch.channels_last)), targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            seen += images.shape[0]
        rate = seen / (time.perf_counter() - t0)
        net.eval()
        ap50, ap = evaluate(net, test, truth)
        best = max(best, ap50)
        print(f"epoch {epoch} test_ap50 {ap50:.4f} train_images_per_sec {rate:.1f} "
              f"seconds {time.perf_counter() - START:.1f} test_ap {ap:.4f}", flush=True)
        if ap50 >= target:
            print(f"reached {ap50:.4f} at epoch {epoch}")
            return
    print(f"missed: best {best:.4f}")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], int(a[1]), int(a[2]), float(a[3]), int(a[4]))
