"""The PyTorch side of scripts/bench-gpu.sh: torchvision's ResNet on one GPU,
bf16 autocast, channels_last, cudnn.benchmark, SGD Nesterov, label smoothing
0.1 -- the settings bench-gpu.sh gives trainyard.
  python gpu_resnet_reference.py ROOT|synthetic DEPTH BATCH WORKERS EPOCHS_OR_STEPS
ROOT: ImageFolder + RandomResizedCrop(224) + flip + ToTensor + Normalize through
a DataLoader (pin_memory, persistent workers, prefetch 4); one JSON line per epoch.
synthetic: one batch resident on the GPU for STEPS steps after 10 of warm-up:
the compute-bound rate, what no input pipeline can beat."""
import json
import os
import sys
import time

import torch
import torchvision
from torchvision import datasets, transforms as T

root, depth, batch, workers, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.backends.cudnn.benchmark = os.environ.get("CUDNN_BENCHMARK", "1") == "1"
device = torch.device("cuda")
model = getattr(torchvision.models, f"resnet{depth}")(num_classes=10).to(device).to(memory_format=torch.channels_last)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1)


def step(x, y):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = criterion(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


common = {"impl": "pytorch", "depth": depth, "batch": batch, "torch": torch.__version__,
          "torchvision": torchvision.__version__}
if root == "synthetic":
    x = torch.randn(batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,), device=device)
    for _ in range(10):
        step(x, y)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(count):
        step(x, y)
    torch.cuda.synchronize()
    secs = time.perf_counter() - start
    print(json.dumps({**common, "mode": "synthetic", "steps": count, "images_per_s": count * batch / secs}), flush=True)
    sys.exit(0)

transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                       T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
loader = torch.utils.data.DataLoader(datasets.ImageFolder(root, transform), batch_size=batch, shuffle=True,
                                     num_workers=workers, pin_memory=True, drop_last=True,
                                     persistent_workers=workers > 0, prefetch_factor=4 if workers > 0 else None)
for epoch in range(count):
    torch.cuda.synchronize()
    start = time.perf_counter()
    images, wait = 0, 0.0
    batches = iter(loader)
    while True:
        waited = time.perf_counter()
        try:
            x, y = next(batches)
        except StopIteration:
            break
        wait += time.perf_counter() - waited
        x = x.to(device, non_blocking=True).to(memory_format=torch.channels_last)
        y = y.to(device, non_blocking=True)
        loss = step(x, y)
        images += x.shape[0]
    torch.cuda.synchronize()
    secs = time.perf_counter() - start
    print(json.dumps({**common, "mode": "jpeg", "epoch": epoch + 1, "workers": workers, "images": images,
                      "secs": round(secs, 3), "images_per_s": images / secs, "input_wait_share": wait / secs,
                      "loss": float(loss)}), flush=True)
