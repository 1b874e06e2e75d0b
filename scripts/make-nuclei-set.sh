#!/usr/bin/env bash
# Makes the nuclei set under OUT (default data/nuclei-set): PNG images and
# masks (OUT/{train,test}/{images,masks}) cut from the fluorescence image and
# instance mask that PyPI's stardist 0.9.2 wheel ships as data
# (scripts/data/make_nuclei_set.py says how). The wheel is downloaded once
# (into ~/.cache/trainyard/data, its SHA-256 checked) and only its two TIFF
# files are read. Needs scripts/install-deps.sh (tifffile, with scikit-image; Pillow).
#   bash scripts/make-nuclei-set.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/torch-env.sh
out="${1:-data/nuclei-set}"
wheel_name=stardist-0.9.2-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
wheel_sha256=2316c0feb7bd5621e7a277cb3868df475c338943c591925c420ee3622c42f023
cache="$TRAINYARD_CACHE/data"
if [ -d "$out/train" ]; then echo "make-nuclei-set: $out/train exists, kept"; exit 0; fi
mkdir -p "$cache"
if [ ! -f "$cache/$wheel_name" ]; then
  # The wheel for CPython 3.11 on x86-64 whatever this machine runs: only its data is read.
  "$TRAINYARD_PYTHON" -m pip download -q --no-deps --only-binary :all: --python-version 3.11 --implementation cp \
    --abi cp311 --platform manylinux_2_28_x86_64 stardist==0.9.2 -d "$cache.partial" ||
    { echo "error: make-nuclei-set: pip could not download stardist==0.9.2 from PyPI (above)" >&2; exit 2; }
  mv "$cache.partial/$wheel_name" "$cache/$wheel_name" && rm -rf "$cache.partial"
fi
if ! echo "$wheel_sha256  $cache/$wheel_name" | sha256sum --check --status; then
  echo "error: make-nuclei-set: $cache/$wheel_name has SHA-256 $(sha256sum "$cache/$wheel_name" | cut -d' ' -f1)," \
    "expected $wheel_sha256 (stardist 0.9.2's); remove it and run again" >&2
  exit 2
fi
rm -rf "$out.partial"
"$TRAINYARD_PYTHON" scripts/data/make_nuclei_set.py "$cache/$wheel_name" "$out.partial"
rm -rf "$out" && mv "$out.partial" "$out"
