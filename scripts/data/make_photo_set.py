"""Makes the photo set: ImageNet-like JPEGs cut from real photographs.

The sources are the photographs that ship inside scikit-image's wheel
(`skimage.data`: no download). Each class is one photograph; each sample is a
random region of it (a fifth of its area or more), rescaled so its short side
is 256-500 pixels, maybe mirrored, colour-shifted and saved at JPEG quality
85-95. The labels mean little (a network tells the photographs apart easily);
the decode cost is that of a real photo set of the same sizes.

    python make_photo_set.py OUT [--train N] [--val N] [--seed S]

writes OUT/train/CLASS/*.jpg, OUT/val/CLASS/*.jpg, and OUT/damaged/ with one
file of each kind real sets contain (kept apart so the clean set trains).
Re-running with the same arguments writes the same bytes.
"""
import argparse
import io
import multiprocessing
import os
import struct
import sys

import numpy as np
from PIL import Image
import skimage.data as data

# class name -> photograph; the grey ones get a tint so every class is colour.
SOURCES = {
    "astronaut": lambda: data.astronaut(),
    "cat": lambda: data.chelsea(),
    "coffee": lambda: data.coffee(),
    "galaxies": lambda: data.hubble_deep_field(),
    "tissue": lambda: data.immunohistochemistry(),
    "retina": lambda: data.retina(),
    "rocket": lambda: data.rocket(),
    "motorcycle": lambda: data.stereo_motorcycle()[0],
    "cameraman": lambda: data.camera(),
    "gravel": lambda: data.gravel(),
}


def as_rgb(image, rng):
    if image.ndim == 2:
        tint = rng.uniform(0.6, 1.0, size=3)
        image = (image[..., None].astype(np.float32) * tint).astype(np.uint8)
    return image[..., :3]


def sample(photo, rng):
    """One distinct JPEG: a random region, rescaled, mirrored, colour-shifted."""
    h, w = photo.shape[:2]
    area = h * w * rng.uniform(0.2, 1.0)
    aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
    ch = int(min(h, round(np.sqrt(area / aspect))))
    cw = int(min(w, round(np.sqrt(area * aspect))))
    y, x = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
    region = photo[y:y + ch, x:x + cw].astype(np.float32)
    region *= rng.uniform(0.75, 1.25, size=3)   # per-channel gain: white balance
    region += rng.uniform(-20, 20)              # exposure
    image = Image.fromarray(np.clip(region, 0, 255).astype(np.uint8))
    short = int(rng.integers(256, 501))
    scale = short / min(ch, cw)
    size = (max(short, round(cw * scale)), max(short, round(ch * scale)))
    image = image.resize(size, Image.BICUBIC)
    if rng.random() < 0.5:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    out = io.BytesIO()
    image.save(out, "JPEG", quality=int(rng.integers(85, 96)))
    return out.getvalue()


def exif_rotated(jpeg):
    """The same JPEG with an EXIF block saying 'rotate 90 degrees' (orientation 6)."""
    tiff = b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 1)
    tiff += struct.pack("<HHII", 0x0112, 3, 1, 6) + struct.pack("<I", 0)
    app1 = b"Exif\x00\x00" + tiff
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + jpeg[2:]


def damaged_files(photo, rng):
    """name -> bytes: the damaged and unusual files real photo sets contain."""
    good = sample(photo, rng)
    image = Image.open(io.BytesIO(good))
    files = {}
    files["truncated.jpg"] = good[: len(good) // 3]
    png = io.BytesIO()
    image.save(png, "PNG")
    files["png_named.jpg"] = png.getvalue()
    cmyk = io.BytesIO()
    image.convert("CMYK").save(cmyk, "JPEG", quality=90)
    files["cmyk.jpg"] = cmyk.getvalue()
    grey = io.BytesIO()
    image.convert("L").save(grey, "JPEG", quality=90)
    files["greyscale.jpg"] = grey.getvalue()
    deep = np.asarray(image.convert("L"), dtype=np.uint16) * 257
    png16 = io.BytesIO()
    Image.fromarray(deep).save(png16, "PNG")  # mode I;16
    files["sixteen_bit.png"] = png16.getvalue()
    files["exif_rotated.jpg"] = exif_rotated(good)
    files["empty.jpg"] = b""
    files["not_an_image.jpg"] = b"<html><body>403 Forbidden</body></html>\n"
    return files


def load_photos(seed):
    rng = np.random.default_rng(seed)
    return {name: as_rgb(load(), rng) for name, load in SOURCES.items()}


def write_class(job):
    out, split, c, count, seed = job
    name, photo = list(load_photos(seed).items())[c]
    folder = os.path.join(out, split, name)
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng([seed, 1 if split == "train" else 2, c])
    for i in range(count):
        with open(os.path.join(folder, f"{name}_{i:06d}.jpg"), "wb") as f:
            f.write(sample(photo, rng))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--train", type=int, default=20000, help="training images in all (split evenly over the classes)")
    p.add_argument("--val", type=int, default=1000, help="validation images in all")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    photos = load_photos(a.seed)
    jobs = []
    for split, count in (("train", a.train), ("val", a.val)):
        per_class = max(1, count // len(photos))
        jobs += [(a.out, split, c, per_class, a.seed) for c in range(len(photos))]
    with multiprocessing.Pool(len(os.sched_getaffinity(0))) as pool:  # one class of one split per task
        pool.map(write_class, jobs)
    for split, count in (("train", a.train), ("val", a.val)):
        per_class = max(1, count // len(photos))
        print(f"make-photo-set: {split}: {per_class * len(photos)} JPEGs in {len(photos)} classes", flush=True)
    folder = os.path.join(a.out, "damaged")
    os.makedirs(folder, exist_ok=True)
    for name, content in damaged_files(photos["coffee"], np.random.default_rng([a.seed, 3])).items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(content)
    print(f"make-photo-set: damaged: {len(os.listdir(folder))} files in {folder}")


if __name__ == "__main__":
    sys.exit(main())
