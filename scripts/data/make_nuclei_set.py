"""Cuts the nuclei set from the 2-D fluorescence image and its instance mask
that stardist's wheel ships as data (stardist/data/images/img2d.tif and
mask2d.tif: 512x512, 125 nuclei from the 2018 Data Science Bowl, BSD-3;
the files only, none of the package's code).

The left half (512 rows x 256 columns) is the training split, cut into
overlapping 160x160 tiles; the right half is the test split, one 512x256
image. Masks are semantic: 0 background, 1 nucleus (any instance).
    python make_nuclei_set.py WHEEL OUT
"""
import sys
import zipfile
from io import BytesIO
from pathlib import Path

import numpy as np
from PIL import Image
import tifffile  # scikit-image's dependency

TILE, STRIDE = 160, 32


def read_tif(wheel, name):
    with zipfile.ZipFile(wheel) as z:
        return tifffile.imread(BytesIO(z.read("stardist/data/images/" + name)))


def save(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def main(wheel, out):
    out = Path(out)
    image = read_tif(wheel, "img2d.tif")
    instances = read_tif(wheel, "mask2d.tif")
    assert image.shape == instances.shape == (512, 512), (image.shape, instances.shape)
    # The fluorescence values fit in 8 bits (0 to 235): kept as they are.
    top = int(image.max())
    pixels = (image if top <= 255 else image * (255.0 / top)).astype(np.uint8)
    mask = (instances > 0).astype(np.uint8)
    left, right = np.s_[:, :256], np.s_[:, 256:]
    count = 0
    for r in range(0, 512 - TILE + 1, STRIDE):
        for c in range(0, 256 - TILE + 1, STRIDE):
            name = f"left-{r:03d}-{c:03d}.png"
            save(out / "train/images" / name, pixels[left][r:r + TILE, c:c + TILE])
            save(out / "train/masks" / name, mask[left][r:r + TILE, c:c + TILE])
            count += 1
    save(out / "test/images/right.png", pixels[right])
    save(out / "test/masks/right.png", mask[right])
    nuclei = len(np.unique(instances)) - 1
    print(f"make-nuclei-set: {count} training tiles of {TILE}x{TILE} from the left half, the right half "
          f"(512x256) to test; {nuclei} nuclei, {mask[right].mean():.1%} of the test pixels nuclei")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
