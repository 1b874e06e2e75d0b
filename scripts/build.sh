#!/usr/bin/env bash
# Configures and builds trainyard (Release) into build/.
# Products: build/bin/trainyard, build/plugins/lib*.so, build/lib/libtrainyard_sdk.so.
# Uses ccache when present; -j2 by default (LibTorch TUs take 1-1.6 GB each).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TRAINYARD_JOBS:-2}"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
elif [ $# -gt 0 ]; then
  cmake -S . -B build "$@"
fi
cmake --build build -j "$jobs"
