"""PyTorch's input pipeline on the photo set, as a PyTorch user writes it.

torchvision.datasets.ImageFolder (PIL decode) with transforms.v2
RandomResizedCrop(224) + RandomHorizontalFlip + ToImage + ToDtype(float32,
scale) + Normalize (ImageNet's mean and std), a DataLoader of batch 256,
shuffled, with WORKERS worker processes; BATCHES batches after one warm-up
batch. Prints one line: images/s and the peak RSS of the main process plus
the largest worker's.

    python image_loader_reference.py ROOT WORKERS BATCHES
"""
import resource
import sys
import time

import torch
from torchvision import datasets
from torchvision.transforms import v2


def main():
    root, workers, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    transform = v2.Compose([
        v2.RandomResizedCrop(224, antialias=True),
        v2.RandomHorizontalFlip(),
        v2.ToImage(),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    dataset = datasets.ImageFolder(root, transform=transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=256, shuffle=True, num_workers=workers,
                                         persistent_workers=workers > 0, prefetch_factor=2 if workers else None)
    it = iter(loader)
    next(it)  # workers started, first batch decoded
    t0 = time.perf_counter()
    images = 0
    for _ in range(batches):
        x, _ = next(it)
        images += x.shape[0]
    seconds = time.perf_counter() - t0
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"images_per_sec {images / seconds:.1f} rss_mb {kb / 1024:.0f}")


if __name__ == "__main__":
    main()
