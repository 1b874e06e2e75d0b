#!/usr/bin/env bash
# Photographs through the input pipeline, in one invocation: trainyard's
# loader alone (JPEG decode at the scale the crop needs, RandomResizedCrop 224,
# flip, normalization, batches of 256) from the photo set's folder, its
# LMDB and its WebDataset shards (indexed, and streamed through pipe:cat),
# with 1 and 2 decode threads
# (`trainyard iterate`), against PyTorch's
# DataLoader with torchvision's ImageFolder and transforms.v2 (PIL decode)
# with 1 and 2 worker processes; images/s, per decode thread or worker, and
# peak RSS of each side. Both sides count from the first batch on (workers
# and decode threads started), over the same number of batches. Queue
# depth: the DataLoader keeps prefetch_factor 2 batches per worker in flight
# (2 and 4); trainyard one per decode thread plus prefetch_batches 2 (3 and 4).
# Knobs: BATCHES (default 20 batches of 256 after a warm-up), PHOTO_SET
# (default data/photo-set; made by scripts/make-photo-set.sh when missing),
# SOURCES (default "folder lmdb shards pipe"), INTRA_OP_THREADS (trainyard's
# distributed.threads_per_process, ATen's intra-op threads of the training
# thread; default 1; 0: trainyard's default, one per CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/torch-env.sh
bin=build/bin/trainyard
[ -x "$bin" ] || { echo "error: build first: bash scripts/build.sh" >&2; exit 2; }
set_dir="${PHOTO_SET:-data/photo-set}"
batches="${BATCHES:-20}"
sources="${SOURCES:-folder lmdb shards pipe}"
intra="${INTRA_OP_THREADS:-1}"
[ -d "$set_dir/lmdb/val" ] && [ -d "$set_dir/shards/val" ] || bash scripts/make-photo-set.sh "$set_dir" >&2
last_shard=$(ls "$set_dir/shards/train" | sed -n 's/^shard-\([0-9]*\)\.tar$/\1/p' | sort | tail -n1)
exp=experiments/photo_set_resnet18.yaml
echo "$("$bin" --version | grep "^LibTorch")"
echo "torchvision: $("$TRAINYARD_PYTHON" -c 'import torchvision; print(torchvision.__version__)' 2>/dev/null); Pillow: $("$TRAINYARD_PYTHON" -c 'import PIL; print(PIL.__version__)')"
source scripts/bench/cpu-header.sh && bench_cpu_header "$bin"
train_images=$(find "$set_dir/train" -name '*.jpg' | wc -l)
echo "photo set: $train_images training JPEGs, $(du -sh "$set_dir/train" | cut -f1) ($set_dir)"
echo "trainyard: distributed.threads_per_process $intra (0: one per CPU); $batches batches of 256"
echo

peak_mb() { awk '/Maximum resident set size/ { printf "%.0f", $NF / 1024 }' "$1"; }
trainyard_rate() {  # SOURCE THREADS -> "images/s rss_mb"
  local sets=(--set loop.batch_per_device=256 --set loop.shuffle=true --set loop.decode_threads="$2"
              --set loop.prefetch_batches=2 --set distributed.threads_per_process="$intra")
  local transforms="color: rgb, crop: random_resized, crop_size: [224, 224], hflip: 0.5,
    mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]"
  if [ "$1" = lmdb ]; then  # the same transforms over the same JPEG bytes
    sets+=(--set "dataset.train={plugin: lmdb, path: '$PWD/$set_dir/lmdb/train', $transforms}")
  elif [ "$1" = shards ]; then
    sets+=(--set "dataset.train={plugin: webdataset, urls: '$PWD/$set_dir/shards/train/shard-{000000..$last_shard}.tar', $transforms}")
  elif [ "$1" = pipe ]; then  # the same shards streamed through a command, as from object storage
    sets+=(--set "dataset.train={plugin: webdataset, urls: 'pipe:cat $PWD/$set_dir/shards/train/shard-{000000..$last_shard}.tar',
      size: $train_images, num_classes: 10, $transforms}")
  else
    sets+=(--set "dataset.train.root=$PWD/$set_dir/train")
  fi
  local log; log=$(mktemp)
  local out; out=$(/usr/bin/time -v "$bin" iterate "$exp" --batches $((batches + 1)) "${sets[@]}" 2>"$log")
  echo "$(echo "$out" | sed -n 's/.*steady_samples_per_sec \([0-9.e+]*\).*/\1/p') $(peak_mb "$log")"
  rm -f "$log"
}
python_rate() {  # WORKERS -> "images/s rss_mb"
  "$TRAINYARD_PYTHON" scripts/bench/image_loader_reference.py "$set_dir/train" "$1" "$batches" |
    sed -n 's/images_per_sec \([0-9.]*\) rss_mb \([0-9]*\)/\1 \2/p'
}

printf "| pipeline | source | threads/workers | images/s | per thread/worker | peak RSS MB |\n|---|---|---|---|---|---|\n"
declare -A py
for w in 1 2; do
  read -r rate rss <<<"$(python_rate "$w")"
  py[$w]=$rate
  printf "| torchvision ImageFolder + v2, DataLoader | folder | %d | %.0f | %.0f | %s |\n" "$w" "$rate" "$(awk -v r="$rate" -v w="$w" 'BEGIN { print r / w }')" "$rss"
done
declare -A ours
for src in $sources; do
  for t in 1 2; do
    read -r rate rss <<<"$(trainyard_rate "$src" "$t")"
    ours[$src$t]=$rate
    printf "| trainyard | %s | %d | %.0f | %.0f | %s |\n" "$src" "$t" "$rate" "$(awk -v r="$rate" -v t="$t" 'BEGIN { print r / t }')" "$rss"
  done
done
echo
for src in $sources; do
  for t in 1 2; do
    printf "trainyard %s / torchvision, %d decode thread(s) vs %d worker(s): %.2fx\n" "$src" "$t" "$t" \
      "$(awk -v a="${ours[$src$t]}" -v b="${py[$t]}" 'BEGIN { print a / b }')"
  done
done
echo "Goal: >= 2.00x on every source."
