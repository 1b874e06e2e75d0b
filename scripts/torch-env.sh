# Sourced by the scripts: where LibTorch (PyPI's torch wheel in a virtual
# environment) and the Gloo headers live. Override any of these to use another
# copy; TRAINYARD_CACHE keeps both between runs (one environment per version).
TRAINYARD_TORCH_VERSION="${TRAINYARD_TORCH_VERSION:-2.15.0}"
TRAINYARD_CACHE="${TRAINYARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainyard}"
TRAINYARD_VENV="${TRAINYARD_VENV:-$TRAINYARD_CACHE/torch-$TRAINYARD_TORCH_VERSION}"
TRAINYARD_PYTHON="$TRAINYARD_VENV/bin/python"
TRAINYARD_GLOO_INCLUDE="${TRAINYARD_GLOO_INCLUDE:-$TRAINYARD_CACHE/gloo/include}"
# torch.utils.cmake_prefix_path, without importing torch (which takes seconds).
TRAINYARD_TORCH_CMAKE_PREFIX="$(ls -d "$TRAINYARD_VENV"/lib/python3*/site-packages/torch/share/cmake 2>/dev/null | head -n1 || true)"
# LibTorch's CMake package looks for nvcc to configure its CUDA targets.
if ! command -v nvcc >/dev/null && [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
  export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
fi
# What every cmake configure of this tree passes (build.sh, test-sanitizers.sh, fuzz.sh).
trainyard_cmake_args=(-DCMAKE_PREFIX_PATH="$TRAINYARD_TORCH_CMAKE_PREFIX" -DTRAINYARD_PYTHON="$TRAINYARD_PYTHON"
                      -DTRAINYARD_GLOO_INCLUDE_DIR="$TRAINYARD_GLOO_INCLUDE")
export TRAINYARD_TORCH_VERSION TRAINYARD_CACHE TRAINYARD_VENV TRAINYARD_PYTHON TRAINYARD_GLOO_INCLUDE
