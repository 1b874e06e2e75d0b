#!/usr/bin/env bash
# Dense prediction, trainyard against the same recipe in a PyTorch loop with
# torchvision's v2 transforms on tv_tensors, one after the other, in one
# invocation. TASK picks the recipe:
#   segmentation (default): the U-Net on the nuclei set
#     (experiments/recipes/nuclei_unet.yaml; scripts/bench/dense_reference.py),
#     target test mIoU 0.90 (Otsu's threshold gives 0.857);
#   detection: CenterNet on the scene set
#     (experiments/recipes/scene_centernet.yaml; scripts/bench/detect_reference.py,
#     measured with pycocotools), target test AP50 0.70.
# For each:
#   1. time to the target: launch to exit, stopping after the first test pass
#      at the target (TARGET overrides it);
#   2. training throughput: images/s of EPOCHS epochs (8; 3 for detection),
#      the median of the epochs after the first (start-up and first-touch
#      allocations excluded).
#
#   bash scripts/bench-dense.sh
#   TASK=detection bash scripts/bench-dense.sh
#   WORKERS=2 bash scripts/bench-dense.sh         # the DataLoader's processes (1 by default)
#   OUT_DIR=/tmp/dense bash scripts/bench-dense.sh  # keep the runs and logs
#   KERNELS=avx2 bash scripts/bench-dense.sh      # LibTorch's kernels held at AVX2, both sides
#
# Threads: the recipe's distributed.threads_per_process (2) for trainyard, as
# many torch threads for the Python loop (THREADS=N overrides both). The
# recipe's precision (fp32) and memory format (channels_last) on both sides.
# Needs a build and the recipe's data (scripts/make-nuclei-set.sh,
# scripts/make-scene-set.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench/common.sh && bench_kernels
source scripts/torch-env.sh
bin=build/bin/trainyard
task="${TASK:-segmentation}"
case "$task" in
  segmentation)
    py=scripts/bench/dense_reference.py experiment=experiments/recipes/nuclei_unet.yaml name=recipe_nuclei_unet
    data=data/nuclei-set make_data=scripts/make-nuclei-set.sh meter=test_miou target="${TARGET:-0.90}"
    epochs="${EPOCHS:-8}" what="batch 8 crops of 128x128" ;;
  detection)
    py=scripts/bench/detect_reference.py experiment=experiments/recipes/scene_centernet.yaml
    name=recipe_scene_centernet data=data/scene-set make_data=scripts/make-scene-set.sh meter=test_ap50
    target="${TARGET:-0.70}" epochs="${EPOCHS:-3}" what="batch 16 scenes of 96x96" ;;
  *) echo "error: TASK=$task: expected segmentation or detection" >&2; exit 2 ;;
esac
workers="${WORKERS:-1}"
[ $# -eq 0 ] || { echo "error: arguments: expected none (settings are environment variables), got '$*'" >&2; exit 2; }
[ -x "$bin" ] || { echo "error: build first: bash scripts/build.sh" >&2; exit 2; }
[ -x "$TRAINYARD_PYTHON" ] || { echo "error: no PyTorch at $TRAINYARD_PYTHON: bash scripts/install-deps.sh" >&2; exit 2; }
[ -d "$data/train" ] || { echo "error: no $data/train: bash $make_data" >&2; exit 2; }
bench_out_dir
threads=${THREADS:-$(awk '/threads_per_process/ {gsub(/[^0-9]/, ""); print; exit}' "$experiment")}
max_epochs=$(awk '/^  epochs:/ {print $2; exit}' "$experiment")
now() { date +%s.%N; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# The median of the numbers on stdin after the first.
median_after_first() { tail -n +2 | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

"$bin" --version | grep "^LibTorch"
echo "PyTorch (Python loop): $("$TRAINYARD_PYTHON" -c 'import torch, torchvision; print(torch.__version__, "torchvision", torchvision.__version__)')"
source scripts/bench/cpu-header.sh && bench_cpu_header "$bin"
echo "task: $task; threads: $threads each; DataLoader workers: $workers; $what; target $meter $target"
echo

run_trainyard() {  # $1: a label, then --set arguments
  local label=$1 && shift
  "$bin" run "$experiment" --output-dir "$out/$label" --fresh --set distributed.threads_per_process="$threads" \
    --set output.report=false --set callbacks=[] "$@" >"$out/$label-trainyard.log" 2>&1 ||
    { cat "$out/$label-trainyard.log" >&2; exit 1; }
}
trainyard_values() {  # $1: the label, $2: phase, $3: value: one per epoch
  "$TRAINYARD_PYTHON" -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["phase"] == sys.argv[2] and sys.argv[3] in r["values"]: print(r["values"][sys.argv[3]])' \
    "$out/$1/$name/metrics.jsonl" "$2" "$3"
}

echo "## time to $meter $target (at most $max_epochs epochs)"
t0=$(now)
run_trainyard target --set stopping.target_meter="$meter" --set stopping.target="$target"
ours=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
ours_epochs=$(trainyard_values target test "$meter" | wc -l)
ours_value=$(trainyard_values target test "$meter" | tail -1 | awk '{ printf "%.4f", $1 }')
echo "trainyard: $ours s, $ours_epochs epochs, $meter $ours_value"
t0=$(now)
"$TRAINYARD_PYTHON" "$py" "$data" "$threads" "$workers" "$target" "$max_epochs" >"$out/target-python.log" 2>&1 ||
  { cat "$out/target-python.log" >&2; exit 1; }
theirs=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
theirs_epochs=$(grep -c '^epoch ' "$out/target-python.log")
theirs_value=$(awk '/^epoch / {m = $4} END {print m}' "$out/target-python.log")
echo "PyTorch + torchvision v2: $theirs s, $theirs_epochs epochs, $meter $theirs_value"
echo

echo "## training images/s over $epochs epochs (median after the first)"
run_trainyard rate --set loop.epochs="$epochs"
ours_rate=$(trainyard_values rate train samples_per_sec | median_after_first | awk '{ printf "%.1f", $1 }')
"$TRAINYARD_PYTHON" "$py" "$data" "$threads" "$workers" 2 "$epochs" >"$out/rate-python.log" 2>&1 ||
  { cat "$out/rate-python.log" >&2; exit 1; }
theirs_rate=$(awk '/^epoch / {print $6}' "$out/rate-python.log" | median_after_first)
echo "trainyard: $ours_rate images/s; PyTorch + torchvision v2: $theirs_rate images/s"
echo
echo "| measure | trainyard | PyTorch + torchvision v2 | trainyard / PyTorch |"
echo "|---|---|---|---|"
echo "| seconds to $meter $target (epochs, last value) | $ours ($ours_epochs, $ours_value) | $theirs ($theirs_epochs, $theirs_value) | $(ratio "$ours" "$theirs") |"
echo "| training images/s | $ours_rate | $theirs_rate | $(ratio "$ours_rate" "$theirs_rate") |"
echo
if [ "$task" = segmentation ]; then
  echo "Goals (issue 51): test mIoU >= 0.90 within 5 minutes; trainyard >= 1.2x the PyTorch loop's images/s."
else
  echo "Goals (issue 51): test AP50 >= 0.70 and AP >= 0.40 within 15 minutes; trainyard >= 1.2x the PyTorch loop's images/s."
fi
