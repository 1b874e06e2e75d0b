#!/usr/bin/env bash
# Time to accuracy: each recipe of experiments/recipes/ trained by trainyard
# and by the same recipe in plain PyTorch Python (scripts/bench/recipe_reference.py,
# run with the PyTorch the build uses), one after the other, in one invocation.
# Each run stops as soon as the test top-1 after an epoch reaches the target
# (trainyard: stopping.target_meter/target), or when the recipe's epochs run
# out. The time is the wall-clock time from launching the process to its exit:
# start-up, data loading, training and the test passes, on both sides.
#
#   bash scripts/bench-time-to-accuracy.sh            # mlp, convnet, resnet (resnet: about an hour here)
#   bash scripts/bench-time-to-accuracy.sh --quick    # the convnet only
#   RECIPES="mlp convnet" bash scripts/bench-time-to-accuracy.sh
#   OUT_DIR=/tmp/tta bash scripts/bench-time-to-accuracy.sh   # keep the runs and logs
#   KERNELS=avx2 bash scripts/bench-time-to-accuracy.sh --quick  # LibTorch's kernels held at AVX2, both sides
#
# The recipes say `precision: auto`: the trainyard run resolves it on this
# machine (bf16-mixed where bfloat16 is native, else fp32) and the Python
# side is given what it chose (config.json's resolved_precision).
#
# Threads: each recipe's distributed.threads_per_process, and as many for the
# Python loop (THREADS=N overrides both). Goal: trainyard reaches each target
# in <= 0.6x the Python loop's time. Needs a build (scripts/build.sh); the
# resnet recipe needs the LMDB databases (scripts/convert-fashion-mnist.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench/common.sh && bench_kernels
source scripts/torch-env.sh
recipes="${RECIPES:-mlp convnet resnet}"
[ "${1:-}" = "--quick" ] && recipes=convnet
[ $# -le 1 ] && { [ $# -eq 0 ] || [ "$1" = "--quick" ]; } ||
  { echo "error: arguments: expected nothing or --quick, got '$*'" >&2; exit 2; }
bin=build/bin/trainyard
py=scripts/bench/recipe_reference.py
[ -x "$bin" ] || { echo "error: build first: bash scripts/build.sh" >&2; exit 2; }
[ -x "$TRAINYARD_PYTHON" ] || { echo "error: no PyTorch at $TRAINYARD_PYTHON: bash scripts/install-deps.sh" >&2; exit 2; }
# OUT_DIR=D keeps the runs (metrics.jsonl, the Python logs) in D.
bench_out_dir
now() { date +%s.%N; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

"$bin" --version | grep "^LibTorch"
echo "PyTorch (Python loop): $("$TRAINYARD_PYTHON" -c 'import torch; print(torch.__version__)')"
source scripts/bench/cpu-header.sh && bench_cpu_header "$bin"
echo
rows=()
for recipe in $recipes; do
  case "$recipe" in
    mlp) target=0.89 ;;
    convnet) target=0.93 ;;
    resnet) target=0.95 ;;
    *) echo "error: RECIPES: unknown recipe '$recipe' (valid: mlp convnet resnet)" >&2; exit 2 ;;
  esac
  experiment=experiments/recipes/fashion_mnist_$recipe.yaml
  name=recipe_fashion_mnist_$recipe
  threads=${THREADS:-$(awk '/threads_per_process/ {gsub(/[^0-9]/, ""); print; exit}' "$experiment")}
  threads=${threads:-1}
  echo "## $recipe (target $target, $threads threads)"
  t0=$(now)
  "$bin" run "$experiment" --output-dir "$out" --fresh --set distributed.threads_per_process="$threads" \
    --set stopping.target_meter=test_accuracy_top1 --set stopping.target="$target" --set output.report=false \
    >"$out/$recipe-trainyard.log" 2>&1 || { cat "$out/$recipe-trainyard.log" >&2; exit 1; }
  ours=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
  epochs=$(grep -o '"epochs_completed": [0-9]*' "$out/$name/summary.json" | awk '{print $2}')
  accuracy=$(grep -o '"test_accuracy_top1": [0-9.]*' "$out/$name/summary.json" | awk '{print $2}')
  reached=$(grep -q '"stopped": "target reached' "$out/$name/summary.json" && echo yes || echo no)
  echo "trainyard: $ours s, $epochs epochs, test top-1 $accuracy, target reached: $reached"
  # The recipe's `precision: auto` as this machine resolved it: the Python side computes alike.
  precision=$("$TRAINYARD_PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1])); print(c.get("resolved_precision", {}).get("precision", c["loop"]["precision"]))' "$out/$name/config.json")
  echo "precision: $precision (both sides)"
  t0=$(now)
  "$TRAINYARD_PYTHON" "$py" "$recipe" "$threads" "$target" "$precision" >"$out/$recipe-python.log" 2>&1 ||
    { cat "$out/$recipe-python.log" >&2; exit 1; }
  theirs=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
  py_epochs=$(grep -c '^epoch ' "$out/$recipe-python.log")
  py_accuracy=$(awk '/^epoch / {a = $4} END {print a}' "$out/$recipe-python.log")
  py_reached=$(grep -q '^reached' "$out/$recipe-python.log" && echo yes || echo no)
  echo "PyTorch Python: $theirs s, $py_epochs epochs, test top-1 $py_accuracy, target reached: $py_reached"
  rows+=("| $recipe | $target | $threads | $precision | $ours ($epochs ep, $accuracy, $reached) | $theirs ($py_epochs ep, $py_accuracy, $py_reached) | $(ratio "$ours" "$theirs") |")
  echo
done
echo "| recipe | target | threads | precision | trainyard s (epochs, last test top-1, reached) | PyTorch Python s (epochs, last test top-1, reached) | trainyard / Python |"
echo "|---|---|---|---|---|---|---|"
printf "%s\n" "${rows[@]}"
echo
echo "Times are wall-clock from launch to exit; a run that did not reach its target ran all its epochs,"
echo "and its time is not a time to accuracy. Goal: trainyard / Python <= 0.6."
