#!/usr/bin/env bash
# The GPU test suite (tests/gpu/gpu_test.cpp), for any machine with NVIDIA GPUs:
#   1 GPU:  single-device training, bf16/fp16 autocast with loss scaling, the
#           pinned side-stream loader, an fp16 resume that ends bit-identical;
#   2+ GPUs: NCCL data parallel equal to one GPU, sync batch norm over NCCL,
#           a killed rank named within the timeout, a bit-identical resume.
# Without a GPU it says so and exits 0 (CI and development machines have none).
# Installs and builds as scripts/test.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "test-gpu: no GPU found (nvidia-smi is not installed); the GPU suite did not run"
  exit 0
fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ "${gpus:-0}" -eq 0 ]; then
  echo "test-gpu: no GPU found (nvidia-smi lists none); the GPU suite did not run"
  exit 0
fi
nvidia-smi -L
bash scripts/install-deps.sh
bash scripts/build.sh
filter='Gpu.*'
[ "$gpus" -ge 2 ] && filter='Gpu.*:MultiGpu.*'
echo "test-gpu: $gpus GPU(s); running $filter"
# TRAINYARD_EXPECT_GPUS turns "LibTorch sees no GPU" from a skip into a failure.
# Two GPUs are enough for every MultiGpu test; ranks take cuda:LOCAL_RANK.
cd build/tests
TRAINYARD_EXPECT_GPUS="$gpus" OMP_NUM_THREADS=1 ../bin/trainyard_tests --gtest_filter="$filter"
