#!/usr/bin/env bash
# Framework overhead: the same MLP, data, batch, optimizer and thread count
# trained by trainyard and by a hand-written LibTorch loop, alternating one
# epoch of each for ROUNDS rounds (default 3), in one invocation.
# Prints per-round train-epoch times and their ratio (goal: <= 1.02), and the
# BLAS library that ran. Needs a build (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${ROUNDS:-3}"
threads="${THREADS:-1}"
data=/usr/share/datasets/fashion-mnist
bin=build/bin/trainyard
ref=build/bin/reference_mlp_loop
[ -x "$bin" ] && [ -x "$ref" ] || { echo "error: build first: bash scripts/build.sh" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cores=$(nproc)
export OMP_NUM_THREADS="$threads"
# trainyard sets these malloc thresholds itself (host/util/process.cpp); the
# reference gets the same, so the ratio measures the framework, not malloc.
ref_env=(env GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824)

# Which LibTorch and BLAS ran (PyPI's wheel links MKL and oneDNN in).
blas=$("$bin" --version | tail -n1)
echo "$blas"
echo "threads per process: $threads; cores: $cores; rounds: $rounds"
echo
printf "| round | trainyard epoch (s) | hand-written loop epoch (s) | ratio |\n|---|---|---|---|\n"
ours_all=() ref_all=()
for r in $(seq 1 "$rounds"); do
  "$bin" run experiments/bench_fashion_mnist_mlp.yaml --output-dir "$out" --fresh \
    --set distributed.threads_per_process="$threads" >/dev/null
  ours=$(grep -o '"secs_per_train": [0-9.e+-]*' "$out/bench_fashion_mnist_mlp/summary.json" | awk '{print $2}')
  theirs=$("${ref_env[@]}" "$ref" "$data" 1 "$threads" | awk '{print $4}')
  ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.3f", a / b }')
  printf "| %d | %.3f | %.3f | %s |\n" "$r" "$ours" "$theirs" "$ratio"
  ours_all+=("$ours") ref_all+=("$theirs")
done
median() { printf "%s\n" "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mo=$(median "${ours_all[@]}") mr=$(median "${ref_all[@]}")
printf "| median | %.3f | %.3f | %s |\n" "$mo" "$mr" "$(awk -v a="$mo" -v b="$mr" 'BEGIN { printf "%.3f", a / b }')"
lo=$(printf "%s\n" "${ours_all[@]}" | sort -g | head -1) lr=$(printf "%s\n" "${ref_all[@]}" | sort -g | head -1)
printf "| best | %.3f | %.3f | %s |\n" "$lo" "$lr" "$(awk -v a="$lo" -v b="$lr" 'BEGIN { printf "%.3f", a / b }')"

echo
echo "trainyard's epoch time is its secs_per_train (data, forward, backward, step, meters, callbacks);"
echo "the hand-written loop times the same per-iteration work. Goal: ratio <= 1.02."
