"""The plain PyTorch Python side of scripts/bench-time-to-accuracy.sh: each
recipe of experiments/recipes/ written as a PyTorch user would write it by
hand (same network, initialization, optimizer, schedule, loss, batch,
precision and memory format; data in memory as tensors; augmentation on
tensors), trained until the test top-1 reaches the target or the recipe's
epochs run out. Keep the RECIPES table below in step with the YAML files.

usage: recipe_reference.py RECIPE THREADS TARGET [PRECISION]
PRECISION (fp32 or bf16-mixed) is what the trainyard run resolved the
recipe's `precision: auto` to on this machine (its config.json says), so that
both sides compute alike; without it, the table's bf16 entry decides.
prints one line per epoch: "epoch N test_top1 A seconds S" (S since start of
the script), then "reached A at epoch N" or "missed: best A".
"""
import math
import sys
import time

START = time.perf_counter()
import torch  # noqa: E402  (the import is part of the measured time, as trainyard's start-up is)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from reference_mlp_loop import read_idx  # noqa: E402  (this folder's idx reader)

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530

# The recipes, as in experiments/recipes/*.yaml.
RECIPES = {
    "mlp": dict(net="mlp", hidden=[512, 256], dropout=0.2, epochs=20, batch=128,
                optimizer="sgd", lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4,
                warmup=200, warmup_start=0.1, label_smoothing=0.1, bf16=False, channels_last=False,
                hflip=0.0, shift=0),
    "convnet": dict(net="convnet", channels=[32, 64], convs_per_block=2, hidden=256, dropout=0.3, epochs=20,
                    batch=128, optimizer="sgd", lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4,
                    warmup=200, warmup_start=0.1, label_smoothing=0.1, bf16=True, channels_last=True,
                    hflip=0.0, shift=0),
    "resnet": dict(net="resnet20", epochs=40, batch=128, optimizer="sgd", lr=0.1, momentum=0.9, nesterov=True,
                   weight_decay=5e-4, warmup=300, warmup_start=0.1, label_smoothing=0.1, bf16=True,
                   channels_last=True, hflip=0.5, shift=2),
}


def load(split):
    prefix = {"train": "train", "test": "t10k"}[split]
    images = read_idx(f"{DATA}/{prefix}-images-idx3-ubyte.gz", 16).view(-1, 1, 28, 28).float().div_(255)
    labels = read_idx(f"{DATA}/{prefix}-labels-idx1-ubyte.gz", 8).long()
    return images.sub_(MEAN).div_(STD), labels


def mlp(r):
    layers, width = [nn.Flatten()], 784
    for h in r["hidden"]:
        layers += [nn.Linear(width, h), nn.ReLU()] + ([nn.Dropout(r["dropout"])] if r["dropout"] > 0 else [])
        width = h
    return nn.Sequential(*layers, nn.Linear(width, 10))


def convnet(r):
    layers, channels, size = [], 1, 28
    for out in r["channels"]:
        for _ in range(r["convs_per_block"]):
            layers += [nn.Conv2d(channels, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
            channels = out
        layers.append(nn.MaxPool2d(2))
        size //= 2
    return nn.Sequential(*layers, nn.Flatten(), nn.Dropout(r["dropout"]), nn.Linear(channels * size * size, r["hidden"]),
                         nn.ReLU(), nn.Linear(r["hidden"], 10))


class Block(nn.Module):
    """He et al.'s CIFAR block: two 3x3 convolutions; where the shape changes, a
    parameter-free shortcut that subsamples and zero-pads channels."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        nn.init.zeros_(self.b2.weight)  # zero-gamma: each block starts as the identity
        self.stride, self.pad = stride, cout - cin

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        s = x[:, :, ::self.stride, ::self.stride] if self.stride != 1 else x
        if self.pad:
            s = F.pad(s, (0, 0, 0, 0, 0, self.pad))
        return F.relu(y + s)


def resnet20(r):
    layers, cin = [nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()], 16
    for stage, width in enumerate([16, 32, 64]):
        for b in range(3):
            layers.append(Block(cin, width, 2 if stage > 0 and b == 0 else 1))
            cin = width
    net = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    for m in net.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
    return net


def augment(x, r, generator):
    """Random horizontal flip and a random shift of up to r['shift'] pixels
    per axis (zero padding), per sample."""
    if r["hflip"] > 0:
        flip = torch.rand(x.shape[0], generator=generator) < r["hflip"]
        x = torch.where(flip.view(-1, 1, 1, 1), x.flip(3), x)
    s = r["shift"]
    if s > 0:
        padded = F.pad(x, (s, s, s, s), value=-MEAN / STD)  # a black border, normalized
        dx = torch.randint(0, 2 * s + 1, (x.shape[0],), generator=generator)
        dy = torch.randint(0, 2 * s + 1, (x.shape[0],), generator=generator)
        x = torch.stack([padded[i, :, dy[i]:dy[i] + 28, dx[i]:dx[i] + 28] for i in range(x.shape[0])])
    return x


def factor(r, step, total):
    """trainyard's schedule: linear warmup, then cosine to 0 over the rest."""
    if step < r["warmup"]:
        return r["warmup_start"] + (1 - r["warmup_start"]) * step / r["warmup"]
    progress = min(1.0, (step - r["warmup"]) / max(1, total - r["warmup"]))
    return 0.5 * (1 + math.cos(math.pi * progress))


def main():
    if len(sys.argv) not in (4, 5) or sys.argv[1] not in RECIPES:
        sys.exit("usage: recipe_reference.py {" + ",".join(RECIPES) + "} THREADS TARGET [fp32|bf16-mixed]")
    r, threads, target = dict(RECIPES[sys.argv[1]]), int(sys.argv[2]), float(sys.argv[3])
    if len(sys.argv) == 5:
        if sys.argv[4] not in ("fp32", "bf16-mixed"):
            sys.exit(f"error: precision: expected fp32 or bf16-mixed, got '{sys.argv[4]}'")
        r["bf16"] = sys.argv[4] == "bf16-mixed"
    print(f"precision {'bf16-mixed' if r['bf16'] else 'fp32'}", flush=True)
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    generator = torch.Generator().manual_seed(1)
    train_x, train_y = load("train")
    test_x, test_y = load("test")
    net = {"mlp": mlp, "convnet": convnet, "resnet20": resnet20}[r["net"]](r)
    memory_format = torch.channels_last if r["channels_last"] else torch.contiguous_format
    net = net.to(memory_format=memory_format)
    # As trainyard's exempt_norm_and_bias: no weight decay on norms and biases.
    decay = [p for p in net.parameters() if p.dim() > 1]
    no_decay = [p for p in net.parameters() if p.dim() <= 1]
    groups = [{"params": decay, "weight_decay": r["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.SGD(groups, lr=r["lr"], momentum=r["momentum"], nesterov=r["nesterov"])
    n, batch = train_x.shape[0], r["batch"]
    steps_per_epoch = (n + batch - 1) // batch
    total = r["epochs"] * steps_per_epoch
    step, best = 0, 0.0
    for epoch in range(1, r["epochs"] + 1):
        net.train()
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, batch):
            idx = order[start:start + batch]
            x, y = train_x.index_select(0, idx), train_y.index_select(0, idx)
            x = augment(x, r, generator).contiguous(memory_format=memory_format)
            for g in opt.param_groups:
                g["lr"] = r["lr"] * factor(r, step, total)
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=r["bf16"]):
                out = net(x)
            loss = F.cross_entropy(out.float(), y, label_smoothing=r["label_smoothing"])
            loss.backward()
            opt.step()
            step += 1
        net.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=r["bf16"]):
            for start in range(0, test_x.shape[0], 1000):
                x = test_x[start:start + 1000].contiguous(memory_format=memory_format)
                correct += net(x).argmax(1).eq(test_y[start:start + 1000]).sum().item()
        accuracy = correct / test_x.shape[0]
        best = max(best, accuracy)
        print(f"epoch {epoch} test_top1 {accuracy:.4f} seconds {time.perf_counter() - START:.1f}", flush=True)
        if accuracy >= target:
            print(f"reached {accuracy:.4f} at epoch {epoch}")
            return
    print(f"missed: best {best:.4f}")


if __name__ == "__main__":
    main()
