#!/usr/bin/env bash
# Mixed precision and memory format on the CPU: the convnet
# (experiments/fashion_mnist_convnet.yaml) trained with fp32, bf16-mixed,
# channels_last, and bf16-mixed with channels_last, in one invocation, the
# same samples and seed each time. Prints train samples/s, the ratio to fp32,
# and test top-1 after the same number of epochs; then the PyTorch Python loop
# (scripts/bench/precision_reference.py, the torch of the build's environment)
# on the same network, batch and threads, and one closing line: "bf16-mixed
# speed-up: R.RRx" where this CPU computes bfloat16 natively, "bf16-mixed
# slowdown: R.RRx (bf16 emulated on this CPU)" where it does not: a measured
# fact either way (AVX2-only CPUs, AMD before Zen 4, most client CPUs).
# Knobs: EPOCHS (default 5), TRAIN_SAMPLES per epoch (default: the whole
# 60000), THREADS (default 1: one thread is not disturbed by other load).
# KERNELS=avx2 holds LibTorch's kernels (oneDNN and ATen, both sides) at AVX2
# on an AVX-512 machine, the way an AVX2-only CPU runs them.
# Needs a build (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench/common.sh && bench_kernels
bin=build/bin/trainyard
[ -x "$bin" ] || { echo "error: build first: bash scripts/build.sh" >&2; exit 2; }
epochs="${EPOCHS:-5}"
samples="${TRAIN_SAMPLES:-0}"
threads="${THREADS:-1}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(experiments/fashion_mnist_convnet.yaml --output-dir "$work" --fresh --set loop.epochs="$epochs"
        --set loop.train_samples_per_epoch="$samples" --set distributed.threads_per_process="$threads"
        --set loop.log_every_iters=100000)
"$bin" --version | grep "^LibTorch"
source scripts/bench/cpu-header.sh && bench_cpu_header "$bin"
native=$("$bin" --version | grep -q "bf16 native" && echo yes || echo no)
echo "threads: $threads; epochs: $epochs; train samples per epoch: $([ "$samples" = 0 ] && echo all || echo "$samples")"
echo
printf "| setup | train samples/s | vs fp32 | test top-1 |\n|---|---|---|---|\n"
# Mean samples/s over the epochs' train rows, and the last test top-1.
speed() { grep '"phase": "train"' "$1" | sed -n 's/.*"samples_per_sec": \([0-9.e+-]*\).*/\1/p' |
          awk '{ s += $1; n++ } END { if (n) printf "%.1f", s / n }'; }
top1() { grep '"phase": "test"' "$1" | tail -1 | sed -n 's/.*"test_accuracy_top1": \([0-9.e+-]*\).*/\1/p'; }
base=""
bf16_ratio=""
declare -A ours
for setup in "fp32|" "bf16-mixed|--set loop.precision=bf16-mixed" \
             "channels_last|--set network.memory_format=channels_last" \
             "bf16-mixed + channels_last|--set loop.precision=bf16-mixed --set network.memory_format=channels_last"; do
  name="${setup%%|*}"
  # shellcheck disable=SC2086
  "$bin" run "${common[@]}" ${setup#*|} >/dev/null
  metrics="$work/fashion_mnist_convnet/metrics.jsonl"
  s=$(speed "$metrics")
  [ -n "$base" ] || base="$s"
  ratio=$(awk -v a="$s" -v b="$base" 'BEGIN { printf "%.2f", a / b }')
  [ "$name" = "bf16-mixed" ] && bf16_ratio="$ratio"
  ours[$name]="$s"
  printf "| %s | %.0f | %sx | %.4f |\n" "$name" "$s" "$ratio" "$(top1 "$metrics")"
done
# The PyTorch Python loop, with the malloc thresholds trainyard sets for itself
# (host/util/process.cpp), so that both sides pay the same for big buffers.
source scripts/torch-env.sh
echo
echo "PyTorch $("$TRAINYARD_PYTHON" -c 'import torch; print(torch.__version__)') Python loop, same network and batch, random inputs:"
echo
printf "| setup | train samples/s | vs fp32 | trainyard / Python |\n|---|---|---|---|\n"
py_base=""
while read -r line; do
  name="${line% *}" s="${line##* }"
  [ -n "$py_base" ] || py_base="$s"
  printf "| %s | %.0f | %sx | %sx |\n" "$name" "$s" "$(awk -v a="$s" -v b="$py_base" 'BEGIN { printf "%.2f", a / b }')" \
    "$(awk -v a="${ours[$name]}" -v b="$s" 'BEGIN { printf "%.2f", a / b }')"
done < <(GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824 \
         "$TRAINYARD_PYTHON" scripts/bench/precision_reference.py "$threads" "${PY_STEPS:-200}")
echo
if [ "$native" = yes ]; then
  echo "bf16-mixed speed-up: ${bf16_ratio}x (bf16 native on this CPU)"
else
  echo "bf16-mixed slowdown: $(awk -v r="$bf16_ratio" 'BEGIN { printf "%.2f", 1 / r }')x (bf16 emulated on this CPU; loop.precision: auto chooses fp32 here)"
fi
