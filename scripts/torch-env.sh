# Sourced by the scripts: which LibTorch trainyard builds against, and where
# the Gloo headers live. Three ways to name the torch:
#   (default)  PyPI's torch wheel, version TRAINYARD_TORCH_VERSION (2.15.0), in a
#              virtual environment that scripts/install-deps.sh makes under
#              TRAINYARD_CACHE (one per version; TRAINYARD_VENV overrides its path);
#   TRAINYARD_TORCH_PYTHON=/opt/torch/.venv/bin/python
#              an existing environment (a cluster's venv, a conda environment):
#              its torch is used as it is; install-deps installs nothing into it;
#   TRAINYARD_TORCH_DIR=/path/to/torch
#              a torch folder (site-packages/torch, or an unpacked LibTorch zip)
#              without a Python: the tests that run Python cannot run.
# TRAINYARD_TORCH_VERSION is then read from that torch. TRAINYARD_BUILD_DIR
# (default build) keeps builds against different torches apart.
#
# Two parts. The choice (which torch, where our environment goes) needs no
# file to exist. What that environment holds (its torch folder, CUDA version,
# libtorch_cpu.so, CMake package) is read by trainyard_torch_locate, which runs
# at the end of this file, and again wherever the environment is created or
# changed. A script that creates it (install-deps.sh) sets
# trainyard_locate_later=1 before sourcing: the derived variables then stay
# unset until it locates, and `set -u` stops any use before the environment
# exists, on a warm machine as on a fresh one.
TRAINYARD_CACHE="${TRAINYARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainyard}"
TRAINYARD_TORCH_EXTERNAL=""
# trainyard_torch_version_in, trainyard_torch_cuda_in
source "$(dirname "${BASH_SOURCE[0]}")/torch-version.sh"

# Sets, from what is on disk now:
#   trainyard_torch_dir           the torch folder (site-packages/torch), "" when there is none yet
#   trainyard_torch_cuda          the CUDA torch was built with ("13.2"), "none" for a CPU build or no torch
#   trainyard_libtorch_cpu        its lib/libtorch_cpu.so ("" when there is none)
#   TRAINYARD_TORCH_CMAKE_PREFIX  torch.utils.cmake_prefix_path, without importing torch ("" when none)
trainyard_torch_locate() {
  case "$TRAINYARD_TORCH_EXTERNAL" in
    python)
      trainyard_torch_dir="$("$TRAINYARD_PYTHON" -c 'import importlib.util as u; s = u.find_spec("torch"); print(s.submodule_search_locations[0] if s else "")' 2>/dev/null || true)" ;;
    folder) trainyard_torch_dir="${TRAINYARD_TORCH_DIR%/}" ;;
    *) trainyard_torch_dir="$(ls -d "$TRAINYARD_VENV"/lib/python3*/site-packages/torch 2>/dev/null | head -n1 || true)" ;;
  esac
  trainyard_torch_cuda="none"
  trainyard_libtorch_cpu=""
  TRAINYARD_TORCH_CMAKE_PREFIX=""
  if [ -n "$trainyard_torch_dir" ]; then
    trainyard_torch_cuda="$(trainyard_torch_cuda_in "$trainyard_torch_dir")"
    [ -f "$trainyard_torch_dir/lib/libtorch_cpu.so" ] && trainyard_libtorch_cpu="$trainyard_torch_dir/lib/libtorch_cpu.so"
    [ -d "$trainyard_torch_dir/share/cmake" ] && TRAINYARD_TORCH_CMAKE_PREFIX="$trainyard_torch_dir/share/cmake"
  fi
  return 0
}

# The nvidia-nvjpeg release for a torch built with this CUDA minor ("" where
# none is pinned): decode: gpu's nvJPEG (docs/building.md), pinned to the
# release of torch's CUDA so that it loads beside the nvidia-* wheels torch brought.
trainyard_nvjpeg_pin_for() {
  case "$1" in
    13.0) echo "nvidia-nvjpeg==13.0.3.75" ;;
    13.1) echo "nvidia-nvjpeg==13.1.0.59" ;;
    13.2) echo "nvidia-nvjpeg==13.2.3.58" ;;
    13.3) echo "nvidia-nvjpeg==13.3.2.43" ;;
    *) echo "" ;;
  esac
}

if [ -n "${TRAINYARD_TORCH_PYTHON:-}" ]; then
  TRAINYARD_TORCH_EXTERNAL="python"
  TRAINYARD_PYTHON="$TRAINYARD_TORCH_PYTHON"
elif [ -n "${TRAINYARD_TORCH_DIR:-}" ]; then
  TRAINYARD_TORCH_EXTERNAL="folder"
  TRAINYARD_PYTHON=""
else
  TRAINYARD_TORCH_VERSION="${TRAINYARD_TORCH_VERSION:-2.15.0}"
  TRAINYARD_VENV="${TRAINYARD_VENV:-$TRAINYARD_CACHE/torch-$TRAINYARD_TORCH_VERSION}"
  TRAINYARD_PYTHON="$TRAINYARD_VENV/bin/python"
fi
# A torch named from outside exists before any script runs, and its version is
# read from it: it is located now, whatever the caller asked.
if [ -n "$TRAINYARD_TORCH_EXTERNAL" ]; then
  trainyard_torch_locate
  if [ "$TRAINYARD_TORCH_EXTERNAL" = python ] && [ -z "$trainyard_torch_dir" ]; then
    echo "error: TRAINYARD_TORCH_PYTHON=$TRAINYARD_TORCH_PYTHON: no torch importable by that Python;" \
         "expected the python of an environment with PyTorch (e.g. /opt/torch/.venv/bin/python)" >&2
    return 2 2>/dev/null || exit 2
  fi
  found_version="$(trainyard_torch_version_in "$trainyard_torch_dir")"
  found_version="${found_version%%+*}"
  if [ -z "$found_version" ] || [ -z "$TRAINYARD_TORCH_CMAKE_PREFIX" ] || [ ! -d "$TRAINYARD_TORCH_CMAKE_PREFIX/Torch" ]; then
    echo "error: torch folder '$trainyard_torch_dir' has no version.py (or build-version) and share/cmake/Torch;" \
         "expected a PyTorch install (site-packages/torch) or an unpacked LibTorch" >&2
    return 2 2>/dev/null || exit 2
  fi
  if [ -n "${TRAINYARD_TORCH_VERSION:-}" ] && [ "$TRAINYARD_TORCH_VERSION" != "$found_version" ]; then
    echo "error: TRAINYARD_TORCH_VERSION=$TRAINYARD_TORCH_VERSION but $trainyard_torch_dir holds torch $found_version;" \
         "expected the same; unset TRAINYARD_TORCH_VERSION (it is read from the torch named)" >&2
    return 2 2>/dev/null || exit 2
  fi
  TRAINYARD_TORCH_VERSION="$found_version"
  TRAINYARD_VENV=""
elif [ -z "${trainyard_locate_later:-}" ]; then
  trainyard_torch_locate
else
  unset trainyard_torch_dir trainyard_torch_cuda trainyard_libtorch_cpu TRAINYARD_TORCH_CMAKE_PREFIX
fi
TRAINYARD_BUILD_DIR="${TRAINYARD_BUILD_DIR:-build}"
# One folder of Gloo headers per torch version (install-deps checks them against that torch's Gloo).
TRAINYARD_GLOO_INCLUDE="${TRAINYARD_GLOO_INCLUDE:-$TRAINYARD_CACHE/gloo-$TRAINYARD_TORCH_VERSION/include}"
# LibTorch's CMake package looks for nvcc to configure its CUDA targets.
if ! command -v nvcc >/dev/null && [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
  export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
fi
# What every cmake configure of this tree passes (build.sh, test-sanitizers.sh, fuzz.sh).
if [ -n "${TRAINYARD_TORCH_CMAKE_PREFIX+located}" ]; then
  trainyard_cmake_args=(-DCMAKE_PREFIX_PATH="$TRAINYARD_TORCH_CMAKE_PREFIX" -DTRAINYARD_PYTHON="$TRAINYARD_PYTHON"
                        -DTRAINYARD_GLOO_INCLUDE_DIR="$TRAINYARD_GLOO_INCLUDE")
fi
# (trainyard_torch_dir, the torch folder found, is not exported: a script started
# from another reads the user's choice again, not the folder found for it.)
export TRAINYARD_TORCH_VERSION TRAINYARD_CACHE TRAINYARD_VENV TRAINYARD_PYTHON TRAINYARD_GLOO_INCLUDE TRAINYARD_BUILD_DIR
