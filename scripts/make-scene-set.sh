#!/usr/bin/env bash
# Makes the scene set under OUT (default data/scene-set): Fashion-MNIST items
# (Debian's fashion-mnist package) pasted onto crops of the photographs in
# scikit-image's wheel, with exact masks, instance masks, boxes and COCO
# instances JSON (scripts/data/make_scene_set.py says how; nothing is
# downloaded). Needs scripts/install-deps.sh.
#   bash scripts/make-scene-set.sh [OUT] [--train N] [--test N] [--size S]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/torch-env.sh
out="${1:-data/scene-set}"
shift $(( $# > 0 ? 1 : 0 ))
if [ -d "$out/train" ]; then echo "make-scene-set: $out/train exists, kept"; exit 0; fi
rm -rf "$out.partial"
"$TRAINYARD_PYTHON" scripts/data/make_scene_set.py "$out.partial" "$@"
rm -rf "$out" && mv "$out.partial" "$out"
