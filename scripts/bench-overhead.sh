#!/usr/bin/env bash
# Framework overhead: the same MLP, data, batch, optimizer and thread count
# trained by trainyard, by a hand-written LibTorch loop
# (scripts/bench/reference_mlp_loop.cpp) and by the PyTorch Python loop
# (scripts/bench/reference_mlp_loop.py, run with the PyTorch the build uses),
# one epoch each in turn for ROUNDS rounds (default 7), in one invocation.
# Two models:
#   mlp:    784-256-128-10 at batch 64, where BLAS time hides per-step costs;
#   narrow: 784-16-16-10 at batch 32, overhead-bound: per-step costs show.
# All three keep the same bookkeeping (running loss and top-1 accuracy).
# Prints a table per model (samples/s per round, medians) and ends with
# "narrow ratio: R": the median over the rounds of trainyard / hand-written
# on the narrow model. The ratio is taken within each round because this
# machine's speed drifts by up to 1.6x between phases of a few seconds (a
# shared VM): the three runs of a round see the same phase more often than
# runs minutes apart. Goals:
# >= 0.98 on mlp, >= 0.95 on narrow, >= 1.5 against the Python loop.
# Needs a build (scripts/build.sh). MODELS="narrow" runs one model only.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/torch-env.sh
rounds="${ROUNDS:-7}"
threads="${THREADS:-1}"
models="${MODELS:-mlp narrow}"
data=/usr/share/datasets/fashion-mnist
bin=build/bin/trainyard
ref=build/bin/reference_mlp_loop
py=scripts/bench/reference_mlp_loop.py
[ -x "$bin" ] && [ -x "$ref" ] || { echo "error: build first: bash scripts/build.sh" >&2; exit 2; }
[ -x "$TRAINYARD_PYTHON" ] || { echo "error: no PyTorch at $TRAINYARD_PYTHON: bash scripts/install-deps.sh" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cores=$(nproc)  # before OMP_NUM_THREADS, which nproc obeys
export OMP_NUM_THREADS="$threads"
# trainyard sets these malloc thresholds itself (host/util/process.cpp); the
# references get the same, so the ratio measures the framework, not malloc.
ref_env=(env GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824)

median() { printf "%s\n" "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

# Which LibTorch and BLAS ran (PyPI's wheel links MKL and oneDNN in).
"$bin" --version | grep "^LibTorch"
source scripts/bench/cpu-header.sh && bench_cpu_header "$bin"
echo "PyTorch (Python loop): $("$TRAINYARD_PYTHON" -c 'import torch; print(torch.__version__, "MKL" if torch.backends.mkl.is_available() else "no MKL", "oneDNN" if torch.backends.mkldnn.is_available() else "no oneDNN")')"
echo "threads per process: $threads; cores: $cores; rounds: $rounds (one epoch of 60,000 samples each)"

narrow_ratio=""
for model in $models; do
  case "$model" in
    mlp) experiment=experiments/bench_fashion_mnist_mlp.yaml batch=64 hidden=256,128 ;;
    narrow) experiment=experiments/bench_fashion_mnist_mlp_narrow.yaml batch=32 hidden=16,16 ;;
    *) echo "error: MODELS: unknown model '$model' (valid: mlp narrow)" >&2; exit 2 ;;
  esac
  name=$(basename "$experiment" .yaml)
  echo
  echo "### $model: MLP 784-${hidden//,/-}-10, batch $batch"
  printf "| round | trainyard (samples/s) | hand-written LibTorch (samples/s) | PyTorch Python (samples/s) | trainyard / hand-written | trainyard / Python |\n|---|---|---|---|---|---|\n"
  ours_all=() ref_all=() py_all=() vs_ref=() vs_py=()
  for r in $(seq 1 "$rounds"); do
    "$bin" run "$experiment" --output-dir "$out" --fresh --set distributed.threads_per_process="$threads" >/dev/null
    ours=$(grep -o '"samples_per_sec": [0-9.e+-]*' "$out/$name/summary.json" | awk '{print $2}')
    ref_s=$("${ref_env[@]}" "$ref" "$data" 1 "$threads" 0 "$batch" "$hidden" | awk '{print $4}')
    py_s=$("$TRAINYARD_PYTHON" "$py" "$data" 1 "$threads" 0 "$batch" "$hidden" | awk '{print $4}')
    theirs=$(awk -v s="$ref_s" 'BEGIN { print 60000 / s }') python=$(awk -v s="$py_s" 'BEGIN { print 60000 / s }')
    printf "| %d | %.0f | %.0f | %.0f | %s | %s |\n" "$r" "$ours" "$theirs" "$python" "$(ratio "$ours" "$theirs")" "$(ratio "$ours" "$python")"
    ours_all+=("$ours") ref_all+=("$theirs") py_all+=("$python")
    vs_ref+=("$(ratio "$ours" "$theirs")") vs_py+=("$(ratio "$ours" "$python")")
  done
  mo=$(median "${ours_all[@]}") mr=$(median "${ref_all[@]}") mp=$(median "${py_all[@]}")
  printf "| median | %.0f | %.0f | %.0f | %.3f | %.3f |\n" "$mo" "$mr" "$mp" "$(median "${vs_ref[@]}")" "$(median "${vs_py[@]}")"
  [ "$model" = narrow ] && narrow_ratio=$(median "${vs_ref[@]}")
done

echo
echo "trainyard's samples/s is its summary's samples_per_sec (data, forward, backward, step, meters,"
echo "callbacks); the references time the same per-iteration work. Ratios: higher is faster for trainyard;"
echo "the median row's ratios are the medians of the per-round ratios."
[ -z "$narrow_ratio" ] || echo "narrow ratio: $narrow_ratio"
