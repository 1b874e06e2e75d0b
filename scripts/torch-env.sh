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
TRAINYARD_CACHE="${TRAINYARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainyard}"
TRAINYARD_TORCH_EXTERNAL=""
# trainyard_torch_version_in, trainyard_torch_cuda_in
source "$(dirname "${BASH_SOURCE[0]}")/torch-version.sh"
if [ -n "${TRAINYARD_TORCH_PYTHON:-}" ]; then
  TRAINYARD_TORCH_EXTERNAL="python"
  TRAINYARD_PYTHON="$TRAINYARD_TORCH_PYTHON"
  trainyard_torch_dir="$("$TRAINYARD_PYTHON" -c 'import importlib.util as u; s = u.find_spec("torch"); print(s.submodule_search_locations[0] if s else "")' 2>/dev/null || true)"
  if [ -z "$trainyard_torch_dir" ]; then
    echo "error: TRAINYARD_TORCH_PYTHON=$TRAINYARD_TORCH_PYTHON: no torch importable by that Python;" \
         "expected the python of an environment with PyTorch (e.g. /opt/torch/.venv/bin/python)" >&2
    return 2 2>/dev/null || exit 2
  fi
elif [ -n "${TRAINYARD_TORCH_DIR:-}" ]; then
  TRAINYARD_TORCH_EXTERNAL="folder"
  trainyard_torch_dir="${TRAINYARD_TORCH_DIR%/}"
  TRAINYARD_PYTHON=""
else
  TRAINYARD_TORCH_VERSION="${TRAINYARD_TORCH_VERSION:-2.15.0}"
  TRAINYARD_VENV="${TRAINYARD_VENV:-$TRAINYARD_CACHE/torch-$TRAINYARD_TORCH_VERSION}"
  TRAINYARD_PYTHON="$TRAINYARD_VENV/bin/python"
  trainyard_torch_dir="$(ls -d "$TRAINYARD_VENV"/lib/python3*/site-packages/torch 2>/dev/null | head -n1 || true)"
fi
if [ -n "$TRAINYARD_TORCH_EXTERNAL" ]; then
  found_version="$(trainyard_torch_version_in "$trainyard_torch_dir")"
  found_version="${found_version%%+*}"
  if [ -z "$found_version" ] || [ ! -d "$trainyard_torch_dir/share/cmake/Torch" ]; then
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
fi
TRAINYARD_BUILD_DIR="${TRAINYARD_BUILD_DIR:-build}"
# One folder of Gloo headers per torch version (install-deps checks them against that torch's Gloo).
TRAINYARD_GLOO_INCLUDE="${TRAINYARD_GLOO_INCLUDE:-$TRAINYARD_CACHE/gloo-$TRAINYARD_TORCH_VERSION/include}"
# torch.utils.cmake_prefix_path, without importing torch.
TRAINYARD_TORCH_CMAKE_PREFIX=""
if [ -n "$trainyard_torch_dir" ] && [ -d "$trainyard_torch_dir/share/cmake" ]; then
  TRAINYARD_TORCH_CMAKE_PREFIX="$trainyard_torch_dir/share/cmake"
fi
# LibTorch's CMake package looks for nvcc to configure its CUDA targets.
if ! command -v nvcc >/dev/null && [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
  export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
fi
# What every cmake configure of this tree passes (build.sh, test-sanitizers.sh, fuzz.sh).
trainyard_cmake_args=(-DCMAKE_PREFIX_PATH="$TRAINYARD_TORCH_CMAKE_PREFIX" -DTRAINYARD_PYTHON="$TRAINYARD_PYTHON"
                      -DTRAINYARD_GLOO_INCLUDE_DIR="$TRAINYARD_GLOO_INCLUDE")
# (trainyard_torch_dir, the torch folder found, is not exported: a script started
# from another reads the user's choice again, not the folder found for it.)
export TRAINYARD_TORCH_VERSION TRAINYARD_CACHE TRAINYARD_VENV TRAINYARD_PYTHON TRAINYARD_GLOO_INCLUDE TRAINYARD_BUILD_DIR
