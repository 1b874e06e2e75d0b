"""The PyTorch Python loop that scripts/bench-overhead.sh compares trainyard
against: the same work as reference_mlp_loop.cpp (Fashion-MNIST in memory as
tensors, an MLP, SGD 0.05 with Nesterov momentum 0.9, a fresh permutation per
epoch, per-iteration bookkeeping of loss and top-1), written as a PyTorch user
would write it, with tensor batches (no DataLoader).

usage: reference_mlp_loop.py DATA_DIR EPOCHS THREADS [SAMPLES_PER_EPOCH [BATCH [HIDDEN]]]
prints one line per epoch: "epoch N seconds S loss L accuracy A"
"""
import gzip
import sys
import time

import torch


def read_idx(path, header):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    return torch.frombuffer(bytearray(raw[header:]), dtype=torch.uint8)


def main():
    if not 4 <= len(sys.argv) <= 7:
        sys.exit(__doc__.strip().splitlines()[-2])
    data, epochs, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    images = read_idx(f"{data}/train-images-idx3-ubyte.gz", 16).view(-1, 1, 28, 28).float().div_(255).sub_(0.2860).div_(0.3530)
    targets = read_idx(f"{data}/train-labels-idx1-ubyte.gz", 8).long()
    n = images.shape[0]
    samples = int(sys.argv[4]) if len(sys.argv) >= 5 and int(sys.argv[4]) > 0 else n
    batch = int(sys.argv[5]) if len(sys.argv) >= 6 else 64
    widths = [int(w) for w in (sys.argv[6] if len(sys.argv) >= 7 else "256,128").split(",")]
    layers, width = [], 784
    for w in widths:
        layers += [torch.nn.Linear(width, w), torch.nn.ReLU()]
        width = w
    net = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        order = torch.randperm(n)
        net.train()
        loss_sum = correct = 0.0
        for start in range(0, samples, batch):
            idx = order[start:min(start + batch, samples)]
            x, y = images.index_select(0, idx), targets.index_select(0, idx)
            opt.zero_grad()
            out = net(x.flatten(1))
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * idx.shape[0]
            correct += out.argmax(1).eq(y).sum().item()
        seconds = time.perf_counter() - t0
        print(f"epoch {epoch} seconds {seconds:.4f} loss {loss_sum / samples:.4f} accuracy {correct / samples:.4f}", flush=True)


if __name__ == "__main__":
    main()
