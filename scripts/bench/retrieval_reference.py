"""The PyTorch side of scripts/bench-retrieval.sh: the retrieval recipe
(experiments/recipes/fashion_mnist_retrieval.yaml) as a metric-learning
user writes it with pytorch-metric-learning: the same convnet with a 64-d
L2-normalized embedding, its MPerClassSampler for P x K batches (4 classes x
16 images), its TripletMarginMiner (semi-hard) and TripletMarginLoss (margin
0.2), Adam at 1e-3; after each epoch its AccuracyCalculator on the held-out
classes 6-9, each test image querying the others. Keep it in step with the
YAML file.

usage: retrieval_reference.py THREADS TARGET EPOCHS [fp32|bf16-mixed]
prints one line per epoch: "epoch N recall_at_1 A map_at_r M samples_per_sec R
seconds S" (R: training samples per second of that epoch's training loop; S
since the start of the script), then "reached A at epoch N" or "missed: best A".
"""
import random
import sys
import time

START = time.perf_counter()
import numpy as np  # noqa: E402
import torch  # noqa: E402  (the import is part of the measured time, as trainyard's start-up is)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from pytorch_metric_learning import distances, losses, miners, samplers  # noqa: E402
from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator  # noqa: E402
from pytorch_metric_learning.utils.inference import CustomKNN  # noqa: E402

from reference_mlp_loop import read_idx  # noqa: E402  (this folder's idx reader)

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
TRAIN_CLASSES, TEST_CLASSES = [0, 1, 2, 3, 4, 5], [6, 7, 8, 9]


def load(split, classes):
    prefix = {"train": "train", "test": "t10k"}[split]
    images = read_idx(f"{DATA}/{prefix}-images-idx3-ubyte.gz", 16).view(-1, 1, 28, 28).float().div_(255)
    labels = read_idx(f"{DATA}/{prefix}-labels-idx1-ubyte.gz", 8).long()
    keep = torch.isin(labels, torch.tensor(classes))
    return images[keep].sub_(MEAN).div_(STD), labels[keep]


class Embedder(nn.Module):
    """trainyard's convnet (channels [32, 64], one conv per block, batch norm,
    max pooling, a 128-unit hidden layer) with embedding_size 64, normalize."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 64))

    def forward(self, x):
        return F.normalize(self.head(self.features(x)), dim=1)


def embed(net, x, bf16):
    net.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = torch.cat([net(x[i:i + 256]).float() for i in range(0, len(x), 256)])
    net.train()
    return out


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: retrieval_reference.py THREADS TARGET EPOCHS [fp32|bf16-mixed]")
    threads, target, epochs = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    precision = sys.argv[4] if len(sys.argv) == 5 else "fp32"
    if precision not in ("fp32", "bf16-mixed"):
        sys.exit(f"error: precision: expected fp32 or bf16-mixed, got '{precision}'")
    bf16 = precision == "bf16-mixed"
    print(f"precision {precision}", flush=True)
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)  # MPerClassSampler draws with NumPy's global generator
    train_x, train_y = load("train", TRAIN_CLASSES)
    test_x, test_y = load("test", TEST_CLASSES)
    net = Embedder()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    distance = distances.LpDistance(normalize_embeddings=True)
    miner = miners.TripletMarginMiner(margin=0.2, type_of_triplets="semihard", distance=distance)
    loss_fn = losses.TripletMarginLoss(margin=0.2, distance=distance)
    sampler = samplers.MPerClassSampler(train_y, m=16, batch_size=64, length_before_new_iter=len(train_y))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(train_x, train_y), batch_size=64,
                                         sampler=sampler, drop_last=True)
    calculator = AccuracyCalculator(include=("precision_at_1", "mean_average_precision_at_r"), k="max_bin_count",
                                    knn_func=CustomKNN(distances.LpDistance(normalize_embeddings=True)))
    best = 0.0
    for epoch in range(1, epochs + 1):
        began, samples = time.perf_counter(), 0
        for x, y in loader:
            samples += len(y)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                e = net(x)
            e = e.float()
            loss = loss_fn(e, y, miner(e, y))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        rate = samples / (time.perf_counter() - began)
        e = embed(net, test_x, bf16)
        m = calculator.get_accuracy(e, test_y, ref_includes_query=True)
        recall = m["precision_at_1"]
        best = max(best, recall)
        print(f"epoch {epoch} recall_at_1 {recall:.4f} map_at_r {m['mean_average_precision_at_r']:.4f} "
              f"samples_per_sec {rate:.0f} seconds {time.perf_counter() - START:.1f}", flush=True)
        if recall >= target:
            print(f"reached {recall:.4f} at epoch {epoch}", flush=True)
            return
    print(f"missed: best {best:.4f}", flush=True)


if __name__ == "__main__":
    main()
