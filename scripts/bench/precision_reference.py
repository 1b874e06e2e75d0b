"""The PyTorch Python loop for scripts/bench-precision.sh: the convnet of
experiments/fashion_mnist_convnet.yaml (conv32-bn-relu-pool, conv64-bn-relu-pool,
dropout, 128, 10; Adam 1e-3; batch 64), timed per training step on random
inputs of Fashion-MNIST's shape, in fp32, bf16 autocast, channels_last and both.
Prints one line per setup: "<setup> <samples/s>".
usage: precision_reference.py THREADS STEPS
"""
import sys
import time

import torch

threads, steps = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads)
torch.manual_seed(0)


def convnet():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3, padding=1, bias=False), torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1, bias=False), torch.nn.BatchNorm2d(64), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Dropout(0.25), torch.nn.Linear(64 * 7 * 7, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10))


x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
for setup, bf16, channels_last in [("fp32", False, False), ("bf16-mixed", True, False),
                                   ("channels_last", False, True), ("bf16-mixed + channels_last", True, True)]:
    model, inputs = convnet(), x
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        inputs = x.to(memory_format=torch.channels_last)
    optimizer = torch.optim.Adam(model.parameters(), 1e-3)

    def step():
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(inputs)
        torch.nn.functional.cross_entropy(out.float(), y).backward()
        optimizer.step()

    for _ in range(5):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    print(setup, f"{64 * steps / (time.perf_counter() - start):.1f}")
