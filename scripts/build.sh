#!/usr/bin/env bash
# Configures and builds trainyard (Release) into build/ against the LibTorch
# that scripts/install-deps.sh put in the cache (scripts/torch-env.sh).
# Products: build/bin/trainyard, build/plugins/lib*.so, build/lib/libtrainyard_sdk.so.
# Uses ccache when present; -j2 by default (LibTorch TUs take 1-1.6 GB each).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/torch-env.sh
if [ -z "$TRAINYARD_TORCH_CMAKE_PREFIX" ]; then
  echo "error: build: no LibTorch in $TRAINYARD_VENV; expected torch $TRAINYARD_TORCH_VERSION there; run scripts/install-deps.sh" >&2
  exit 2
fi
jobs="${TRAINYARD_JOBS:-2}"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${trainyard_cmake_args[@]}" "$@"
elif [ $# -gt 0 ] || ! grep -qxF "TRAINYARD_PYTHON:FILEPATH=$TRAINYARD_PYTHON" build/CMakeCache.txt \
     || ! grep -qxF "TRAINYARD_GLOO_INCLUDE_DIR:PATH=$TRAINYARD_GLOO_INCLUDE" build/CMakeCache.txt; then
  cmake -S . -B build "${trainyard_cmake_args[@]}" "$@"
fi
cmake --build build -j "$jobs"
