#!/usr/bin/env bash
# Makes the photo set under OUT (default data/photo-set): ImageNet-layout
# JPEGs cut from the photographs in scikit-image's wheel
# (scripts/data/make_photo_set.py says how), and the same images as an LMDB
# (OUT/lmdb/{train,val}) and as WebDataset tar shards of 1,000 shuffled
# samples (OUT/shards/{train,val}/shard-NNNNNN.tar), the JPEG bytes as they
# are. Needs a build and
# scripts/install-deps.sh (scikit-image is pinned there).
#   bash scripts/make-photo-set.sh [OUT] [--train N] [--val N]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/torch-env.sh
out="${1:-data/photo-set}"
shift $(( $# > 0 ? 1 : 0 ))
bin=build/bin/trainyard
[ -x "$bin" ] || { echo "error: build first: bash scripts/build.sh" >&2; exit 2; }
if [ -d "$out/train" ]; then
  echo "make-photo-set: $out/train exists, kept"
else
  "$TRAINYARD_PYTHON" scripts/data/make_photo_set.py "$out.partial" "$@"
  rm -rf "$out" && mv "$out.partial" "$out"
fi
for split in train val; do
  if [ -e "$out/lmdb/$split" ]; then echo "make-photo-set: $out/lmdb/$split exists, kept"; continue; fi
  "$bin" convert --from folder --input "$out/$split" --output "$out/lmdb/$split" --encoding keep --quiet
done
for split in train val; do
  if [ -e "$out/shards/$split" ]; then echo "make-photo-set: $out/shards/$split exists, kept"; continue; fi
  "$bin" convert --from folder --input "$out/$split" --output "$out/shards/$split" --to webdataset --encoding keep \
    --shuffle --seed 1 --shard-size 1000 --quiet
done
