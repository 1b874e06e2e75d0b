# Sourced by the package's bin/ commands: finds this machine's torch, checks
# that it is the torch the package was built against, and puts the package's
# libraries and that torch's on the library path. The package carries every
# library it needs except glibc, libstdc++ and torch (with the NVIDIA
# libraries torch's wheel brings), which it takes from the machine.
#   TRAINYARD_TORCH_PYTHON=/opt/torch/.venv/bin/python   the Python whose torch to use
#                                                        (default: python3 on PATH)
#   TRAINYARD_TORCH_DIR=/path/to/site-packages/torch     a torch folder instead
ty_pkg="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
# shellcheck source=/dev/null
source "$ty_pkg/share/build-info.sh"  # TY_VERSION TY_TORCH_VERSION TY_TORCH_CUDA TY_GLIBC TY_GLIBCXX
# shellcheck source=../torch-version.sh
source "$ty_pkg/share/torch-version.sh"  # trainyard_torch_version_in, trainyard_torch_cuda_in
ty_fail() { echo "error: trainyard package $ty_pkg: $*" >&2; exit 2; }
ty_rebuild="make a package against it (TRAINYARD_TORCH_PYTHON=that python scripts/package.sh, docs/building.md)"

# --- which torch -------------------------------------------------------------------
if [ -n "${TRAINYARD_TORCH_DIR:-}" ]; then
  ty_torch="${TRAINYARD_TORCH_DIR%/}"; ty_python="${TRAINYARD_TORCH_PYTHON:-}"; ty_named="TRAINYARD_TORCH_DIR=$TRAINYARD_TORCH_DIR"
else
  ty_python="${TRAINYARD_TORCH_PYTHON:-$(command -v python3 || true)}"
  ty_named="${TRAINYARD_TORCH_PYTHON:+TRAINYARD_TORCH_PYTHON=}${ty_python}"
  [ -n "$ty_python" ] || ty_fail "no python3 on PATH to find torch with; expected torch $TY_TORCH_VERSION;" \
                                 "set TRAINYARD_TORCH_PYTHON to the python of an environment that has it"
  # Where torch is, without importing it (seconds) and without this package's library path.
  ty_torch="$(env -u LD_LIBRARY_PATH -u LD_PRELOAD "$ty_python" -c \
    'import importlib.util as u; s = u.find_spec("torch"); print(s.submodule_search_locations[0] if s else "")' 2>/dev/null || true)"
  [ -n "$ty_torch" ] || ty_fail "$ty_python has no torch; expected torch $TY_TORCH_VERSION (CUDA $TY_TORCH_CUDA);" \
                                "set TRAINYARD_TORCH_PYTHON to the python of an environment that has it"
fi
[ -f "$ty_torch/version.py" ] && [ -f "$ty_torch/lib/libtorch_cpu.so" ] ||
  ty_fail "$ty_torch ($ty_named) is not a torch install (no version.py and lib/libtorch_cpu.so);" \
          "expected site-packages/torch of an environment with torch $TY_TORCH_VERSION"

# --- the same torch the package was built against -------------------------------------
ty_found="$(trainyard_torch_version_in "$ty_torch")"
ty_found_cuda="$(trainyard_torch_cuda_in "$ty_torch")"
if [ "${ty_found%%+*}" != "$TY_TORCH_VERSION" ] || [ "${ty_found_cuda%%.*}" != "${TY_TORCH_CUDA%%.*}" ]; then
  ty_fail "built against torch $TY_TORCH_VERSION with CUDA $TY_TORCH_CUDA, but $ty_torch ($ty_named) is torch $ty_found" \
          "with CUDA $ty_found_cuda; expected the same torch version and CUDA major (LibTorch's C++ ABI changes" \
          "between releases); name that torch with TRAINYARD_TORCH_PYTHON or TRAINYARD_TORCH_DIR, or $ty_rebuild"
fi

# --- the C and C++ runtimes the package's binaries were linked against ------------------
ty_glibc="$(ldd --version 2>/dev/null | sed -n '1s/.* \([0-9][0-9]*\.[0-9][0-9]*\)$/\1/p')"
if [ -n "$ty_glibc" ] && [ -n "$TY_GLIBC" ] && [ "$(printf '%s\n%s\n' "$TY_GLIBC" "$ty_glibc" | sort -V | head -n1)" != "$TY_GLIBC" ]; then
  ty_fail "this machine's glibc is $ty_glibc; expected $TY_GLIBC or newer (the glibc the package was built with);" \
          "build the package on a system no newer than this one"
fi
ty_libstdcxx="$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ && !found { print $NF; found = 1 }' || true)"
if [ -n "$TY_GLIBCXX" ] && [ -n "$ty_libstdcxx" ] && ! grep -qaF "GLIBCXX_$TY_GLIBCXX" "$ty_libstdcxx"; then
  ty_fail "this machine's $ty_libstdcxx lacks GLIBCXX_$TY_GLIBCXX; expected the C++ runtime of GCC" \
          "$TY_GCC or newer (the one the package was built with); build the package on a system no newer than this one"
fi

# --- the library path ------------------------------------------------------------
# The package's own libraries first, then that torch's; torch's libraries find
# the NVIDIA wheels' libraries through their own RUNPATH, and trainyard's
# executable needs libcudart from them directly.
ty_site="$(dirname "$ty_torch")"
ty_nvidia="$(ls -d "$ty_site"/nvidia/*/lib 2>/dev/null | paste -sd: -)"
export LD_LIBRARY_PATH="$ty_pkg/lib:$ty_pkg/build/lib:$ty_torch/lib${ty_nvidia:+:$ty_nvidia}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The tests and the GPU suite read the tree from here, with this Python.
export TRAINYARD_TEST_BUILD_DIR="$ty_pkg/build" TRAINYARD_TEST_SOURCE_DIR="$ty_pkg/src" TRAINYARD_TEST_PYTHON="$ty_python"
