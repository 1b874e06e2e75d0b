#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and trains the
# default Fashion-MNIST experiment (results in runs/fashion_mnist_mlp/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
TRAINYARD_BUILD_TARGETS=trainyard_runtime bash scripts/build.sh  # the host and its plugins; test.sh builds the tests
exec build/bin/trainyard run experiments/fashion_mnist_mlp.yaml "$@"
