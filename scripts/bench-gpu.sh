#!/usr/bin/env bash
# The GPU benchmark, in one invocation on one GPU: ResNet-50 and ResNet-18
# trained from JPEG photographs (RandomResizedCrop 224 + flip + normalize,
# bf16 autocast, channels_last, SGD Nesterov, batch 256) by trainyard and by a
# PyTorch loop with torchvision's DataLoader (scripts/bench/gpu_resnet_reference.py)
# with the same number of decode threads / workers, and the compute-bound rate
# (PyTorch, one batch resident on the GPU); images/s of the last epoch, input
# wait, and the ratios. Runs from the build tree, or from a package:
#   bin/trainyard-env bash src/scripts/bench-gpu.sh
# Knobs: PHOTOS (training JPEGs, 8000), EPOCHS (3), BATCH (256), DEPTHS ("50 18"),
# THREADS (decode threads / workers, default CPUs - 1), FEW ("4": ResNet-18 again
# with that many), PHOTO_SET (folder; made with scripts/data/make_photo_set.py).
# Without a GPU it says so and exits 0.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ -n "${TRAINYARD_TEST_BUILD_DIR:-}" ]; then  # a package (bin/trainyard-env)
  bin="$TRAINYARD_TEST_BUILD_DIR/bin/trainyard"; python="${TRAINYARD_TEST_PYTHON:-python3}"
else
  cd "$here/.."
  source scripts/torch-env.sh
  bin="$PWD/$TRAINYARD_BUILD_DIR/bin/trainyard"; python="$TRAINYARD_PYTHON"
fi
if ! command -v nvidia-smi >/dev/null 2>&1 || [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -eq 0 ]; then
  echo "bench-gpu: no GPU here (nvidia-smi lists none); the GPU benchmark did not run"
  exit 0
fi
[ -x "$bin" ] || { echo "error: bench-gpu: no trainyard at $bin; expected a build (scripts/build.sh) or a package" >&2; exit 2; }
cpus=$(nproc --all)  # plain nproc honours OMP_NUM_THREADS
threads="${THREADS:-$(( cpus > 1 ? cpus - 1 : 1 ))}"
epochs="${EPOCHS:-3}" batch="${BATCH:-256}" photos="${PHOTOS:-8000}"
set_dir="${PHOTO_SET:-${TMPDIR:-/tmp}/trainyard-bench-gpu-photos}"
work="$(mktemp -d "${TMPDIR:-/tmp}/trainyard-bench-gpu.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# Python without the package's library path (its torch finds its own libraries).
py() { env -u LD_LIBRARY_PATH -u LD_PRELOAD "$python" "$@"; }

echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader | sed -n 1p)"
source "$here/bench/cpu-header.sh" && bench_cpu_header "$bin"
echo "$cpus CPUs; $threads decode threads / DataLoader workers; batch $batch; $epochs epochs (the last one counts)"
"$bin" --version | grep '^LibTorch'
py -c 'import torch, torchvision; print("PyTorch", torch.__version__, "torchvision", torchvision.__version__)'
if [ ! -d "$set_dir/train" ]; then
  py "$here/data/make_photo_set.py" "$set_dir.partial" --train "$photos" --val 100 > "$work/photos.log"
  rm -rf "$set_dir" && mv "$set_dir.partial" "$set_dir"
fi
echo "photo set: $(find "$set_dir/train" -name '*.jpg' | wc -l) training JPEGs, $(du -sh "$set_dir/train" | cut -f1) ($set_dir)"
echo

trainyard_rate() {  # DEPTH THREADS -> "images/s input-wait-share"
  cat > "$work/rn$1.yaml" <<YAML
name: bench_gpu
seed: 1
dataset:
  train: {plugin: image_folder, root: '$set_dir/train', color: rgb, crop: random_resized, crop_size: [224, 224],
          hflip: 0.5, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}
network: {plugin: resnet, depth: $1, memory_format: channels_last}
loss: {plugin: cross_entropy, label_smoothing: 0.1}
optimizer: {plugin: sgd, lr: 0.1, momentum: 0.9, nesterov: true, weight_decay: 0.0001}
meters: [{plugin: loss}]
loop: {epochs: $epochs, batch_per_device: $batch, precision: bf16-mixed, decode_threads: $2, prefetch_batches: 4}
distributed: {num_gpus: 1}
YAML
  "$bin" run "$work/rn$1.yaml" --output-dir "$work/ty$1-$2" --fresh > "$work/ty.log" 2>&1 ||
    { tail -n 5 "$work/ty.log" >&2; echo "0 0"; return; }
  py - "$work/ty$1-$2/bench_gpu/metrics.jsonl" <<'PY'
import json, sys
last = [json.loads(l)["values"] for l in open(sys.argv[1]) if '"samples_per_sec"' in l and '"phase": "train"' in l][-1]
print("%.0f %.2f" % (last["samples_per_sec"], last.get("input_wait_share", float("nan"))))
PY
}
pytorch_rate() {  # DEPTH WORKERS -> "images/s input-wait-share"
  py "$here/bench/gpu_resnet_reference.py" "$set_dir/train" "$1" "$batch" "$2" "$epochs" > "$work/pt.log" 2>&1 ||
    { tail -n 5 "$work/pt.log" >&2; echo "0 0"; return; }
  py -c 'import json, sys; v = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
print("%.0f %.2f" % (v["images_per_s"], v["input_wait_share"]))' "$work/pt.log"
}
compute_bound() {  # DEPTH -> images/s
  py "$here/bench/gpu_resnet_reference.py" synthetic "$1" "$batch" 0 40 2>/dev/null |
    py -c 'import json, sys; print("%.0f" % json.loads(sys.stdin.readlines()[-1])["images_per_s"])' || echo 0
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'; }

printf '%-10s %8s | %-24s | %-24s | %13s | %-10s %-10s\n' model threads "trainyard img/s (wait)" \
       "PyTorch img/s (wait)" "compute-bound" "ty/PyTorch" "ty/bound"
row() {  # DEPTH THREADS
  read -r ty ty_wait < <(trainyard_rate "$1" "$2")
  read -r pt pt_wait < <(pytorch_rate "$1" "$2")
  bound="${bounds[$1]}"
  printf '%-10s %8s | %10s (%4.0f%%)        | %10s (%4.0f%%)        | %13s | %-10s %-10s\n' "ResNet-$1" "$2" \
         "$ty" "$(awk -v w="$ty_wait" 'BEGIN { print 100 * w }')" "$pt" "$(awk -v w="$pt_wait" 'BEGIN { print 100 * w }')" \
         "$bound" "$(ratio "$ty" "$pt")" "$(ratio "$ty" "$bound")"
}
declare -A bounds
for depth in ${DEPTHS:-50 18}; do bounds[$depth]=$(compute_bound "$depth"); done
for depth in ${DEPTHS:-50 18}; do row "$depth" "$threads"; done
for few in ${FEW:-4}; do row 18 "$few"; done
