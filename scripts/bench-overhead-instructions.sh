#!/usr/bin/env bash
# Framework overhead without timing noise: the CPU instructions executed by
# one training epoch of trainyard and of the hand-written LibTorch loop
# (scripts/bench/reference_mlp_loop.cpp), counted by valgrind's callgrind.
# Same MLP, data, batch, optimizer, one thread, SAMPLES samples (default 6400:
# 100 iterations). Only the epoch is counted: trainyard's Trainer::default_epoch
# (without its end-of-epoch checkpoint, which the reference does not write)
# and the reference's train_epoch; start-up and data loading are not.
# Prints a table with the ratio (goal: <= 1.02). Needs a build (scripts/build.sh);
# installs valgrind when it is missing. About 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
samples="${SAMPLES:-6400}"
data=/usr/share/datasets/fashion-mnist
bin=build/bin/trainyard
ref=build/bin/reference_mlp_loop
[ -x "$bin" ] && [ -x "$ref" ] || { echo "error: build first: bash scripts/build.sh" >&2; exit 2; }
if ! command -v valgrind >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=1
ref_env=(env GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824)
blas=$("$bin" --version | tail -n1)

# Instructions (Ir) collected between the toggles; callgrind writes them as
# the "summary:" line of its output file.
count() { awk '/^summary:/ {print $2}' "$1"; }

# --toggle-collect flips collection on entry and exit, so nested toggles
# switch it off inside the checkpoint and on again after it.
valgrind --tool=callgrind --callgrind-out-file="$out/ours.cg" \
  --toggle-collect='trainyard::host::Trainer::default_epoch*' \
  --toggle-collect='trainyard::host::Trainer::default_checkpoint*' \
  "$bin" run experiments/bench_fashion_mnist_mlp.yaml --output-dir "$out" --fresh \
  --set loop.train_samples_per_epoch="$samples" --set output.report=false >"$out/ours.log" 2>&1 ||
  { cat "$out/ours.log" >&2; exit 1; }
iterations=$(grep -o '"iteration": [0-9]*' "$out/bench_fashion_mnist_mlp/summary.json" | awk '{print $2}')
"${ref_env[@]}" valgrind --tool=callgrind --callgrind-out-file="$out/ref.cg" --toggle-collect='*train_epoch*' \
  "$ref" "$data" 1 1 "$samples" >"$out/ref.log" 2>&1 || { cat "$out/ref.log" >&2; exit 1; }
ref_iterations=$(( (samples + 63) / 64 ))
ours=$(count "$out/ours.cg") theirs=$(count "$out/ref.cg")
[ -n "$ours" ] && [ "$ours" -gt 0 ] && [ -n "$theirs" ] && [ "$theirs" -gt 0 ] ||
  { echo "error: callgrind collected nothing (ours: '$ours', reference: '$theirs')" >&2; exit 1; }

echo "$blas"
echo "valgrind: $(valgrind --version); samples per epoch: $samples; threads: 1"
echo
printf "| | trainyard | hand-written loop | ratio |\n|---|---|---|---|\n"
printf "| iterations | %d | %d | |\n" "$iterations" "$ref_iterations"
printf "| instructions in the epoch | %d | %d | %s |\n" "$ours" "$theirs" \
  "$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.4f", a / b }')"
printf "| instructions per iteration | %.0f | %.0f | |\n" \
  "$(awk -v a="$ours" -v n="$iterations" 'BEGIN { print a / n }')" \
  "$(awk -v a="$theirs" -v n="$ref_iterations" 'BEGIN { print a / n }')"
echo
echo "Counted by callgrind: trainyard's Trainer::default_epoch without its checkpoint, the"
echo "reference's train_epoch. Instruction counts are exact, not times: memory stalls are not in them."
echo "Goal: ratio <= 1.02."
