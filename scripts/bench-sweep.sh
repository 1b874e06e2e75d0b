#!/usr/bin/env bash
# A grid of 16 trials run to the end against the same 16 trials under
# asynchronous successive halving (`trainyard sweep --halving`), one after the
# other in one invocation: wall time, epochs trained and the best trial of
# each. The experiment is the Fashion-MNIST MLP recipe
# (experiments/recipes/fashion_mnist_mlp.yaml) on TRAIN_SAMPLES training
# images (default 12000) for EPOCHS epochs (default 9: rungs at 1, 3, 9 with
# REDUCTION 3), the grid 4 learning rates x 2 batch sizes x 2 dropouts,
# ranked by the test loss. Both sweeps run PARALLEL trials at a time
# (default 2), each with one thread.
#
#   bash scripts/bench-sweep.sh
#   OUT_DIR=/tmp/bs bash scripts/bench-sweep.sh     # keep both sweeps
#   REDUCTION=2 TRAIN_SAMPLES=60000 bash scripts/bench-sweep.sh
#
# Needs a build (scripts/build.sh) and the Fashion-MNIST files.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench/common.sh && bench_kernels
[ $# -eq 0 ] || { echo "error: arguments: expected none (settings are EPOCHS, TRAIN_SAMPLES, REDUCTION, PARALLEL, OUT_DIR), got '$*'" >&2; exit 2; }
bin=build/bin/trainyard
experiment=experiments/recipes/fashion_mnist_mlp.yaml
epochs=${EPOCHS:-9}
samples=${TRAIN_SAMPLES:-12000}
parallel=${PARALLEL:-2}
reduction=${REDUCTION:-3}
[ -x "$bin" ] || { echo "error: build first: bash scripts/build.sh" >&2; exit 2; }
bench_out_dir
now() { date +%s.%N; }

"$bin" --version | grep "^LibTorch"
source scripts/bench/cpu-header.sh && bench_cpu_header "$bin"
echo "16 trials of $experiment: $epochs epochs of $samples training images, $parallel at a time, ranked by test_loss"
echo

common=(--grid optimizer.lr=0.003,0.01,0.03,0.1 --grid loop.batch_per_device=64,256 --grid network.dropout=0,0.2
        --set loop.epochs="$epochs" --set dataset.train.limit="$samples" --set stopping.monitor=test_loss
        --set distributed.threads_per_process=1 --set output.report=false --set loop.decode_threads=0
        --parallel "$parallel" --metric test_loss)
run_sweep() {  # NAME ARGS...: prints "SECONDS EPOCHS BEST"
  local name=$1; shift
  local t0; t0=$(now)
  # Exit code 1: some trials failed (a diverging rate); the sweep still ranks the rest.
  local rc=0
  "$bin" sweep "$experiment" "${common[@]}" --output-dir "$out/$name" "$@" >"$out/$name.log" 2>&1 || rc=$?
  [ "$rc" -le 1 ] && grep -q '^sweep: done' "$out/$name.log" || { cat "$out/$name.log" >&2; exit 1; }
  local secs; secs=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
  local line; line=$(grep '^sweep: done' "$out/$name.log")
  local trained; trained=$(sed -E 's/.* ([0-9]+) epochs trained.*/\1/' <<<"$line")
  local best; best=$(sed -E 's/.*best: ([^;]+);.*/\1/' <<<"$line")
  echo "$secs $trained $best"
}

read -r grid_s grid_epochs grid_best < <(run_sweep grid)
echo "grid:    $grid_s s, $grid_epochs epochs trained, best $grid_best"
read -r halving_s halving_epochs halving_best < <(run_sweep halving --halving --reduction "$reduction" --min-epochs 1)
echo "halving: $halving_s s, $halving_epochs epochs trained, best $halving_best"
awk -v h="$halving_s" -v g="$grid_s" -v he="$halving_epochs" -v ge="$grid_epochs" \
  'BEGIN { printf "halving / grid: %.2f of the time, %.2f of the epochs\n", h / g, he / ge }'
if [ "$grid_best" = "$halving_best" ]; then
  echo "same best trial: yes"
else
  # Where halving's pick stands in the grid's ranking (sweep.csv is best first).
  place=$(awk -F, -v b="$halving_best" '$2 == b { print $1 }' "$out/grid/recipe_fashion_mnist_mlp-sweep/sweep.csv")
  echo "same best trial: no; halving's best is the grid's number $place"
fi
