#!/usr/bin/env bash
# Framework overhead without timing noise: the CPU instructions executed by
# one training epoch of trainyard and of the hand-written LibTorch loop
# (scripts/bench/reference_mlp_loop.cpp), counted by valgrind's callgrind.
# Same data, optimizer, one thread, two models: the MLP 784-256-128-10 at batch
# 64 for SAMPLES samples (default 6400: 100 iterations) and the narrow
# 784-16-16-10 at batch 32 for NARROW_SAMPLES (default 16000: 500 iterations).
# Only the epoch is counted: trainyard's EpochLoop::default_epoch (without its
# end-of-epoch checkpoint, which the reference does not write) and the
# reference's train_epoch; start-up and data loading are not. Prints a table
# per model with the ratio. Needs a build (scripts/build.sh, or
# TRAINYARD_BUILD_DIR); installs valgrind when it is missing. About 9 minutes.
# A toggle that names no function (a rename) collects nothing and is an
# error: ctest runs a short form (scripts.TheInstructionBenchmarkCountsTheEpochLoop).
# MODELS="narrow" counts one model only.
set -euo pipefail
cd "$(dirname "$0")/.."
samples="${SAMPLES:-6400}"
narrow_samples="${NARROW_SAMPLES:-16000}"
data=/usr/share/datasets/fashion-mnist
bin="${TRAINYARD_BUILD_DIR:-build}/bin/trainyard"
ref="${TRAINYARD_BUILD_DIR:-build}/bin/reference_mlp_loop"
[ -x "$bin" ] && [ -x "$ref" ] || { echo "error: build first: bash scripts/build.sh" >&2; exit 2; }
if ! command -v valgrind >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=1
ref_env=(env GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824)
blas=$("$bin" --version | grep "^LibTorch")
source scripts/bench/cpu-header.sh && bench_cpu_header "$bin"

# Instructions (Ir) collected between the toggles; callgrind writes them as
# the "summary:" line of its output file.
count() { awk '/^summary:/ {print $2}' "$1"; }

echo "$blas"
echo "valgrind: $(valgrind --version); threads: 1"

# --toggle-collect flips collection on entry and exit, so nested toggles
# switch it off inside the checkpoint and on again after it.
# measure MODEL EXPERIMENT SAMPLES BATCH HIDDEN
measure() {
  local model=$1 experiment=$2 samples=$3 batch=$4 hidden=$5 name
  name=$(basename "$experiment" .yaml)
  valgrind --tool=callgrind --callgrind-out-file="$out/ours-$model.cg" \
    --toggle-collect='trainyard::host::EpochLoop::default_epoch*' \
    --toggle-collect='trainyard::host::EpochLoop::default_checkpoint*' \
    "$bin" run "$experiment" --output-dir "$out" --fresh \
    --set loop.train_samples_per_epoch="$samples" --set output.report=false >"$out/ours.log" 2>&1 ||
    { cat "$out/ours.log" >&2; exit 1; }
  iterations=$(grep -o '"iteration": [0-9]*' "$out/$name/summary.json" | awk '{print $2}')
  "${ref_env[@]}" valgrind --tool=callgrind --callgrind-out-file="$out/ref-$model.cg" --toggle-collect='*train_epoch*' \
    "$ref" "$data" 1 1 "$samples" "$batch" "$hidden" >"$out/ref.log" 2>&1 || { cat "$out/ref.log" >&2; exit 1; }
  ref_iterations=$(( (samples + batch - 1) / batch ))
  ours=$(count "$out/ours-$model.cg") theirs=$(count "$out/ref-$model.cg")
  [ -n "$ours" ] && [ "$ours" -gt 0 ] && [ -n "$theirs" ] && [ "$theirs" -gt 0 ] ||
    { echo "error: callgrind collected nothing (ours: '$ours', reference: '$theirs')" >&2; exit 1; }
  echo
  echo "### $model: MLP 784-${hidden//,/-}-10, batch $batch, $samples samples"
  printf "| | trainyard | hand-written loop | hand-written / trainyard |\n|---|---|---|---|\n"
  printf "| iterations | %d | %d | |\n" "$iterations" "$ref_iterations"
  printf "| instructions in the epoch | %d | %d | %s |\n" "$ours" "$theirs" \
    "$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.4f", b / a }')"
  printf "| instructions per iteration | %.0f | %.0f | |\n" \
    "$(awk -v a="$ours" -v n="$iterations" 'BEGIN { print a / n }')" \
    "$(awk -v a="$theirs" -v n="$ref_iterations" 'BEGIN { print a / n }')"
}
for model in ${MODELS:-mlp narrow}; do
  case "$model" in
    mlp) measure mlp experiments/bench_fashion_mnist_mlp.yaml "$samples" 64 256,128 ;;
    narrow) measure narrow experiments/bench_fashion_mnist_mlp_narrow.yaml "$narrow_samples" 32 16,16 ;;
    *) echo "error: bench-overhead-instructions: MODELS: unknown model '$model'; expected mlp, narrow" >&2; exit 2 ;;
  esac
done
echo
echo "Counted by callgrind: trainyard's EpochLoop::default_epoch without its checkpoint, the"
echo "reference's train_epoch. Instruction counts are exact, not times: memory stalls are not in them."
echo "Goals: hand-written / trainyard >= 0.98 (mlp) and >= 0.95 (narrow): higher is fewer instructions for trainyard."
