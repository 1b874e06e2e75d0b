"""The plain PyTorch side of scripts/bench-dense.sh: experiments/recipes/
nuclei_unet.yaml written as a PyTorch user writes it today: the same U-Net
(plugins/unet), data (PNG tiles decoded per sample by torchvision.io),
augmentation (torchvision's v2 transforms on tv_tensors: the mask follows
the image's crop, flips and rotation, 255 filled in), loss, optimizer,
batch, precision and memory format (channels_last), a DataLoader of WORKERS processes; trained until the
test mIoU (the whole test half, macro over the classes, 255 ignored)
reaches the target or the epochs run out.

usage: dense_reference.py DATA THREADS WORKERS TARGET EPOCHS [PRECISION]
prints one line per epoch: "epoch N test_miou M train_images_per_sec R
seconds S" (S since the script started), then "reached M at epoch N" or
"missed: best M".
"""
import sys
import time

START = time.perf_counter()
import torch  # noqa: E402  (the import is part of the measured time, as trainyard's start-up is)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from pathlib import Path  # noqa: E402
from torchvision import tv_tensors  # noqa: E402
from torchvision.io import decode_png, read_file  # noqa: E402
from torchvision.transforms import v2  # noqa: E402

MEAN, STD, IGNORE, CLASSES = 0.133, 0.104, 255, 2  # as the recipe says
DEPTH, WIDTH, BATCH, LR, CROP = 3, 16, 8, 0.003, 128


def block(cin, cout):
    layers = []
    for _ in range(2):
        layers += [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
        cin = cout
    return nn.Sequential(*layers)


class Unet(nn.Module):
    """plugins/unet/unet.cpp: depth levels, width doubling, transposed-conv upsampling, skip concatenation."""

    def __init__(self, channels):
        super().__init__()
        self.down, width = nn.ModuleList(), WIDTH
        for _ in range(DEPTH):
            self.down.append(block(channels, width))
            channels, width = width, width * 2
        self.bottom = block(channels, width)
        self.up, self.merge = nn.ModuleList(), nn.ModuleList()
        for _ in range(DEPTH):
            self.up.append(nn.ConvTranspose2d(width, width // 2, 2, stride=2))
            self.merge.append(block(width, width // 2))
            width //= 2
        self.classes = nn.Conv2d(width, CLASSES, 1)

    def forward(self, x):
        skips = []
        for level in self.down:
            x = level(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, merge in zip(self.up, self.merge):
            x = merge(torch.cat([skips.pop(), up(x)], 1))
        return self.classes(x)


class Tiles(torch.utils.data.Dataset):
    def __init__(self, folder, transform):
        self.images = sorted((Path(folder) / "images").glob("*.png"))
        self.masks = [Path(folder) / "masks" / p.name for p in self.images]
        self.transform = transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image = tv_tensors.Image(decode_png(read_file(str(self.images[i]))))
        mask = tv_tensors.Mask(decode_png(read_file(str(self.masks[i])))[0].long())
        return self.transform(image, mask)


def main(data, threads, workers, target, epochs, precision="fp32"):
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    to_input = [v2.ToDtype({tv_tensors.Image: torch.float32, "others": None}, scale=True), v2.Normalize([MEAN], [STD])]
    train = Tiles(f"{data}/train", v2.Compose([
        v2.RandomCrop(CROP), v2.RandomHorizontalFlip(), v2.RandomVerticalFlip(),
        v2.RandomRotation(180, interpolation=v2.InterpolationMode.BILINEAR,
                          fill={tv_tensors.Image: 0, tv_tensors.Mask: IGNORE}),
        *to_input]))
    test = Tiles(f"{data}/test", v2.Compose(to_input))
    loader = torch.utils.data.DataLoader(train, batch_size=BATCH, shuffle=True, num_workers=workers,
                                         persistent_workers=workers > 0, drop_last=True)
    net = Unet(1).to(memory_format=torch.channels_last)  # the recipe's memory_format
    optimizer = torch.optim.Adam(net.parameters(), lr=LR)
    autocast = precision == "bf16-mixed"
    best = 0.0
    for epoch in range(1, epochs + 1):
        net.train()
        seen, t0 = 0, time.perf_counter()
        for images, masks in loader:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = F.cross_entropy(net(images.contiguous(memory_format=torch.channels_last)), masks,
                                       ignore_index=IGNORE)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            seen += images.shape[0]
        rate = seen / (time.perf_counter() - t0)
        net.eval()
        confusion = torch.zeros(CLASSES, CLASSES, dtype=torch.long)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            for i in range(len(test)):
                image, mask = test[i]
                predicted = net(image[None].contiguous(memory_format=torch.channels_last)).argmax(1)[0]
                keep = mask != IGNORE
                confusion += torch.bincount(mask[keep] * CLASSES + predicted[keep],
                                            minlength=CLASSES * CLASSES).view(CLASSES, CLASSES)
        diagonal = confusion.diag().double()
        miou = (diagonal / (confusion.sum(0) + confusion.sum(1) - diagonal).double()).mean().item()
        best = max(best, miou)
        print(f"epoch {epoch} test_miou {miou:.4f} train_images_per_sec {rate:.1f} "
              f"seconds {time.perf_counter() - START:.1f}", flush=True)
        if miou >= target:
            print(f"reached {miou:.4f} at epoch {epoch}")
            return
    print(f"missed: best {best:.4f}")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], int(a[1]), int(a[2]), float(a[3]), int(a[4]), *a[5:])
