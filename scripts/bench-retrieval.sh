#!/usr/bin/env bash
# Time to recall@1 on held-out classes: the retrieval recipe
# (experiments/recipes/fashion_mnist_retrieval.yaml: train on Fashion-MNIST
# classes 0-5, query and gallery on 6-9) trained by trainyard and by the same
# recipe in PyTorch with pytorch-metric-learning (scripts/bench/
# retrieval_reference.py, with the PyTorch the build uses), one after the
# other, in one invocation. Each run stops as soon as the test recall@1 after
# an epoch reaches TARGET (default 0.91), or when the recipe's epochs run
# out. Times are wall-clock from launching the process to its exit: start-up,
# data loading, training and the test passes, on both sides.
#
#   bash scripts/bench-retrieval.sh
#   TARGET=0.92 EPOCHS=5 bash scripts/bench-retrieval.sh
#   OUT_DIR=/tmp/br bash scripts/bench-retrieval.sh      # keep the runs and logs
#   KERNELS=avx2 bash scripts/bench-retrieval.sh         # LibTorch's kernels held at AVX2, both sides
#
# The recipe says `precision: auto`: trainyard resolves it on this machine
# and the Python side is given what it chose (config.json). Both sides use
# THREADS threads (default 2). Needs a build (scripts/build.sh) and the
# Python environment (scripts/install-deps.sh: pytorch-metric-learning).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench/common.sh && bench_kernels
[ $# -eq 0 ] || { echo "error: arguments: expected none (settings are TARGET, EPOCHS, THREADS, OUT_DIR), got '$*'" >&2; exit 2; }
source scripts/torch-env.sh
bin=build/bin/trainyard
experiment=experiments/recipes/fashion_mnist_retrieval.yaml
name=recipe_fashion_mnist_retrieval
target=${TARGET:-0.91}
epochs=${EPOCHS:-$(awk '/^  epochs:/ {print $2; exit}' "$experiment")}
threads=${THREADS:-2}
[ -x "$bin" ] || { echo "error: build first: bash scripts/build.sh" >&2; exit 2; }
[ -x "$TRAINYARD_PYTHON" ] || { echo "error: no PyTorch at $TRAINYARD_PYTHON: bash scripts/install-deps.sh" >&2; exit 2; }
bench_out_dir
now() { date +%s.%N; }

"$bin" --version | grep "^LibTorch"
echo "PyTorch: $("$TRAINYARD_PYTHON" -c 'import torch; print(torch.__version__)'), pytorch-metric-learning $("$TRAINYARD_PYTHON" -c 'import pytorch_metric_learning as p; print(p.__version__)')"
source scripts/bench/cpu-header.sh && bench_cpu_header "$bin"
echo "target: test recall@1 >= $target on classes 6-9 (4000 queries, leave-one-out), at most $epochs epochs, $threads threads"
echo

t0=$(now)
"$bin" run "$experiment" --output-dir "$out" --fresh --set distributed.threads_per_process="$threads" \
  --set loop.epochs="$epochs" --set stopping.target_meter=test_recall_at_1 --set stopping.target="$target" \
  --set output.report=false >"$out/trainyard.log" 2>&1 || { cat "$out/trainyard.log" >&2; exit 1; }
ours=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
ours_epochs=$(grep -o '"epochs_completed": [0-9]*' "$out/$name/summary.json" | awk '{print $2}')
ours_recall=$(grep -o '"test_recall_at_1": [0-9.]*' "$out/$name/summary.json" | awk '{print $2}')
ours_reached=$(grep -q '"stopped": "target reached' "$out/$name/summary.json" && echo yes || echo no)
precision=$("$TRAINYARD_PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1])); print(c.get("resolved_precision", {}).get("precision", c["loop"]["precision"]))' "$out/$name/config.json")
# Training throughput of the last epoch (the training loop alone: no start-up, no test pass).
ours_rate=$(grep -o '"samples_per_sec": [0-9.e+]*' "$out/$name/metrics.jsonl" | tail -1 | awk '{printf "%.0f", $2}')
echo "trainyard: $ours s, $ours_epochs epochs, test recall@1 $ours_recall, target reached: $ours_reached, training $ours_rate samples/s (precision $precision)"

t0=$(now)
"$TRAINYARD_PYTHON" scripts/bench/retrieval_reference.py "$threads" "$target" "$epochs" "$precision" \
  >"$out/python.log" 2>&1 || { cat "$out/python.log" >&2; exit 1; }
theirs=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
py_epochs=$(grep -c '^epoch ' "$out/python.log")
py_recall=$(awk '/^epoch / {a = $4} END {print a}' "$out/python.log")
py_reached=$(grep -q '^reached' "$out/python.log" && echo yes || echo no)
py_rate=$(awk '/^epoch / {r = $8} END {print r}' "$out/python.log")
echo "PyTorch + pytorch-metric-learning: $theirs s, $py_epochs epochs, test recall@1 $py_recall, target reached: $py_reached, training $py_rate samples/s"
echo
echo "| side | seconds | epochs | test recall@1 | target reached | training samples/s (last epoch) |"
echo "|---|---|---|---|---|---|"
echo "| trainyard | $ours | $ours_epochs | $ours_recall | $ours_reached | $ours_rate |"
echo "| PyTorch + pytorch-metric-learning | $theirs | $py_epochs | $py_recall | $py_reached | $py_rate |"
echo "trainyard / Python time: $(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }');" \
  "training throughput, trainyard / Python: $(awk -v a="$ours_rate" -v b="$py_rate" 'BEGIN { printf "%.2f", a / b }')"
echo "The two sides draw different P x K batches (trainyard's plan, pytorch-metric-learning's MPerClassSampler),"
echo "so the epochs each needs differ by chance as well as by speed; the throughput compares speed alone."
echo "A run that did not reach the target ran all its epochs: its time is not a time to recall@1."
