"""Makes the scene set: Fashion-MNIST items pasted onto crops of real
photographs, with exact semantic masks, instance masks, boxes and COCO
instances JSON, for segmentation (and, later, detection).

Items come from Debian's fashion-mnist package (train items from its train
split, test items from its test split); backgrounds are crops of the
photographs in scikit-image's wheel, split by source (train: astronaut,
coffee, chelsea, rocket, hubble_deep_field; test: immunohistochemistry,
retina, motorcycle). Each scene is SIZE x SIZE RGB with 2 to 4 items, each
scaled 1x to 2x, tinted with a random colour and blended by its own
intensity; a pixel belongs to an item where the item's intensity is 40 or
more (of 255), later items covering earlier ones. Class ids: 0 background,
1 + the Fashion-MNIST label (so 11 classes).

    python make_scene_set.py OUT [--train N] [--test N] [--size S] [--seed S]

writes OUT/{train,test}/images/NNNNNN.jpg (quality 95), masks/NNNNNN.png
(class ids), instances/NNNNNN.png (16-bit instance ids, 0 background) and
OUT/{train,test}/instances.json (COCO: boxes [x, y, w, h] of each item's
visible pixels, area, uncompressed RLE, iscrowd 0; categories 1-10 as
Fashion-MNIST's classes). The same arguments write the same bytes.
"""
import argparse
import gzip
import json
from pathlib import Path

import numpy as np
from PIL import Image
import skimage.data as data

FASHION = "/usr/share/datasets/fashion-mnist"
NAMES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle-boot"]
BACKGROUNDS = {
    "train": [data.astronaut, data.coffee, data.chelsea, data.rocket, data.hubble_deep_field],
    "test": [data.immunohistochemistry, data.retina, lambda: data.stereo_motorcycle()[0]],
}
THRESHOLD = 40


def read_idx(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def fashion(split):
    prefix = {"train": "train", "test": "t10k"}[split]
    images = read_idx(f"{FASHION}/{prefix}-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
    labels = read_idx(f"{FASHION}/{prefix}-labels-idx1-ubyte.gz", 8)
    return images, labels


def rle(binary):
    """COCO's uncompressed RLE: run lengths over the mask in column-major order, starting with zeros."""
    flat = binary.T.reshape(-1).astype(np.uint8)
    changes = np.flatnonzero(np.diff(np.concatenate([[0], flat, [1 - flat[-1]]])))
    counts = np.diff(np.concatenate([[0], changes]))
    return counts.tolist()[: len(counts)]


def scene(rng, photos, items, labels, size):
    photo = photos[rng.integers(len(photos))]
    y = rng.integers(photo.shape[0] - size + 1)
    x = rng.integers(photo.shape[1] - size + 1)
    canvas = photo[y:y + size, x:x + size].astype(np.float32)
    semantic = np.zeros((size, size), np.uint8)
    instances = np.zeros((size, size), np.uint16)
    placed = []
    for instance in range(1, rng.integers(2, 5) + 1):
        k = rng.integers(len(items))
        side = int(28 * rng.uniform(1.0, 2.0))
        item = np.asarray(Image.fromarray(items[k]).resize((side, side), Image.BILINEAR), np.float32)
        top, left = rng.integers(size - side + 1), rng.integers(size - side + 1)
        colour = rng.uniform(40, 255, 3).astype(np.float32)
        alpha = (item / 255.0)[..., None]
        region = canvas[top:top + side, left:left + side]
        canvas[top:top + side, left:left + side] = alpha * colour + (1 - alpha) * region
        inside = item >= THRESHOLD
        semantic[top:top + side, left:left + side][inside] = 1 + labels[k]
        instances[top:top + side, left:left + side][inside] = instance
        placed.append((instance, 1 + int(labels[k])))
    return canvas.clip(0, 255).astype(np.uint8), semantic, instances, placed


def make_split(out, split, count, size, seed):
    rng = np.random.default_rng([seed, 0 if split == "train" else 1])
    photos = []
    for load in BACKGROUNDS[split]:
        p = load()
        photos.append(np.stack([p] * 3, -1) if p.ndim == 2 else p[..., :3])
    items, labels = fashion(split)
    folder = Path(out) / split
    for sub in ("images", "masks", "instances"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    coco = {"images": [], "annotations": [],
            "categories": [{"id": i + 1, "name": n} for i, n in enumerate(NAMES)]}
    for n in range(count):
        image, semantic, instances, placed = scene(rng, photos, items, labels, size)
        name = f"{n:06d}"
        Image.fromarray(image).save(folder / "images" / f"{name}.jpg", quality=95)
        Image.fromarray(semantic).save(folder / "masks" / f"{name}.png")
        Image.fromarray(instances).save(folder / "instances" / f"{name}.png")
        coco["images"].append({"id": n + 1, "file_name": f"images/{name}.jpg", "height": size, "width": size})
        for instance, category in placed:
            visible = instances == instance
            if not visible.any():
                continue  # covered by later items
            rows, cols = np.flatnonzero(visible.any(1)), np.flatnonzero(visible.any(0))
            box = [int(cols[0]), int(rows[0]), int(cols[-1] - cols[0] + 1), int(rows[-1] - rows[0] + 1)]
            coco["annotations"].append({
                "id": len(coco["annotations"]) + 1, "image_id": n + 1, "category_id": category, "bbox": box,
                "area": int(visible.sum()), "iscrowd": 0,
                "segmentation": {"counts": rle(visible), "size": [size, size]}})
    (folder / "instances.json").write_text(json.dumps(coco))
    return len(coco["annotations"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--train", type=int, default=3000)
    parser.add_argument("--test", type=int, default=300)
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--seed", type=int, default=1)
    a = parser.parse_args()
    for split, count in (("train", a.train), ("test", a.test)):
        boxes = make_split(a.out, split, count, a.size, a.seed)
        print(f"make-scene-set: {split}: {count} scenes of {a.size}x{a.size}, {boxes} items")


if __name__ == "__main__":
    main()
