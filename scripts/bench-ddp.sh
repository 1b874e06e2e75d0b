#!/usr/bin/env bash
# Data parallel on CPU: the convnet (experiments/fashion_mnist_convnet.yaml)
# trained by 1 process with 2 threads and by 2 processes with 1 thread each
# (Gloo over loopback), the same global batch of 64 and the same samples, in
# one invocation. Prints samples/s, the share of train time spent in
# communication, and the final test accuracy of both.
# Needs a build (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin/trainyard
[ -x "$bin" ] || { echo "error: build first: bash scripts/build.sh" >&2; exit 2; }
samples="${TRAIN_SAMPLES:-25600}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(experiments/fashion_mnist_convnet.yaml --output-dir "$work" --fresh --set loop.epochs=1
        --set loop.train_samples_per_epoch="$samples" --set loop.test_samples=5000)
echo "$("$bin" --version | grep "^LibTorch"); cores: $(nproc); $samples training samples"
source scripts/bench/cpu-header.sh && bench_cpu_header "$bin"
echo
printf "| setup | train samples/s | communication share | test top-1 |\n|---|---|---|---|\n"
field() { grep '"secs_per_train"' "$1" | tail -1 | sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p"; }
report() {
  local metrics="$work/fashion_mnist_convnet/metrics.jsonl"
  local acc comm
  acc=$(grep '"phase": "test"' "$metrics" | tail -1 | sed -n 's/.*"test_accuracy_top1": \([0-9.e+-]*\).*/\1/p')
  comm=$(field "$metrics" comm_share)
  printf "| %s | %.0f | %s | %.4f |\n" "$1" "$(field "$metrics" samples_per_sec)" \
    "$( [ -n "$comm" ] && awk -v c="$comm" 'BEGIN { printf "%.1f%%", 100 * c }' || echo "-")" "$acc"
}
"$bin" run "${common[@]}" --set distributed.threads_per_process=2 --set loop.batch_per_device=64 >/dev/null
report "1 process x 2 threads, batch 64"
"$bin" run "${common[@]}" --set distributed.threads_per_process=1 --set loop.batch_per_device=32 --nproc-per-node 2 >/dev/null
report "2 processes x 1 thread, batch 32 each"
