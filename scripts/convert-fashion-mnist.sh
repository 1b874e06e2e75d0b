#!/usr/bin/env bash
# Packs Debian's Fashion-MNIST idx files into LMDB databases of PNG records
# under data/fashion_mnist_lmdb/{train,test} (for experiments/fashion_mnist_lmdb_convnet.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
src=/usr/share/datasets/fashion-mnist
out="${1:-data/fashion_mnist_lmdb}"
for split in train:train t10k:test; do
  prefix=${split%%:*} name=${split##*:}
  if [ -e "$out/$name" ]; then echo "convert: $out/$name exists, kept"; continue; fi
  build/bin/trainyard convert --from idx --images "$src/$prefix-images-idx3-ubyte.gz" \
    --labels "$src/$prefix-labels-idx1-ubyte.gz" --output "$out/$name"
done
