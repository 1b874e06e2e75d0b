#!/usr/bin/env bash
# Configures and builds trainyard (Release) into build/ (TRAINYARD_BUILD_DIR)
# against the LibTorch scripts/torch-env.sh names: the one install-deps.sh put
# in the cache, or the one TRAINYARD_TORCH_PYTHON / TRAINYARD_TORCH_DIR names.
# Products: build/bin/trainyard, build/plugins/lib*.so, build/lib/libtrainyard_sdk.so.
# Uses ccache when present; -j2 by default (LibTorch TUs take 1-1.6 GB each).
# TRAINYARD_BUILD_TARGETS (default: all) names what to build: scripts/demo.sh
# builds trainyard_runtime (the host and its built-in plugins, no tests).
# Arguments are passed to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/torch-env.sh
if [ -z "$TRAINYARD_TORCH_CMAKE_PREFIX" ]; then
  echo "error: build: no LibTorch in ${TRAINYARD_VENV:-$trainyard_torch_dir}; expected torch $TRAINYARD_TORCH_VERSION there; run scripts/install-deps.sh" >&2
  exit 2
fi
build="$TRAINYARD_BUILD_DIR"
# CMake caches the Torch package it found: a build folder configured against
# another torch would keep it (and mix headers of one with libraries of another).
if [ -f "$build/CMakeCache.txt" ]; then
  cached="$(sed -n 's/^Torch_DIR:PATH=//p' "$build/CMakeCache.txt")"
  if [ -n "$cached" ] && [ "$(realpath -m "$cached")" != "$(realpath -m "$TRAINYARD_TORCH_CMAKE_PREFIX/Torch")" ]; then
    echo "error: build: $build was configured against the torch in $cached;" \
         "expected $TRAINYARD_TORCH_CMAKE_PREFIX/Torch (torch $TRAINYARD_TORCH_VERSION);" \
         "remove $build, or set TRAINYARD_BUILD_DIR to a folder for this torch" >&2
    exit 2
  fi
fi
jobs="${TRAINYARD_JOBS:-2}"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${trainyard_cmake_args[@]}" "$@"
elif [ $# -gt 0 ] || ! grep -qxF "TRAINYARD_PYTHON:FILEPATH=$TRAINYARD_PYTHON" "$build/CMakeCache.txt" \
     || ! grep -qxF "TRAINYARD_GLOO_INCLUDE_DIR:PATH=$TRAINYARD_GLOO_INCLUDE" "$build/CMakeCache.txt"; then
  cmake -S . -B "$build" "${trainyard_cmake_args[@]}" "$@"
fi
read -r -a targets <<< "${TRAINYARD_BUILD_TARGETS:-all}"
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
