#!/usr/bin/env bash
# scripts/torch-env.sh and install-deps.sh on a first install, without a 3 GB
# one: the torch environment does not exist when torch-env.sh is sourced and
# appears afterwards (as install-deps' torch step makes it), and every value
# derived from it (torch folder, CUDA version, libtorch_cpu.so, CMake prefix,
# the nvJPEG pin, the Gloo check) is read from the environment as it then is.
# The environment made here is a real venv whose site-packages/torch is a link
# to the build's torch, so the Gloo check reads the real libtorch_cpu.so.
# Also: the three ways of naming a torch, TRAINYARD_TORCH_VERSION=2.11.0, and
# install-deps' and build.sh's one-line errors where no torch is found.
#   torch_env_test.sh SOURCE_DIR PYTHON GLOO_INCLUDE_DIR TMP_DIR
set -euo pipefail
src="$1" python="$2" gloo="$3" tmp="$4"
rm -rf "$tmp" && mkdir -p "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
torch_dir="$("$python" -c 'import importlib.util as u; print(u.find_spec("torch").submodule_search_locations[0])')"
real_cuda="$(sed -n "s/^cuda: .* = '\([^']*\)'.*/\1/p; s/^cuda = '\([^']*\)'.*/\1/p" "$torch_dir/version.py" | head -n1)"
[ -f "$torch_dir/lib/libtorch_cpu.so" ] || fail "the build's torch $torch_dir has no lib/libtorch_cpu.so"
pyver="$("$python" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')"
# Every case runs in a clean environment: none of the caller's TRAINYARD_* choices leak in.
clean_env=(env -u TRAINYARD_TORCH_PYTHON -u TRAINYARD_TORCH_DIR -u TRAINYARD_TORCH_VERSION -u TRAINYARD_VENV
           -u TRAINYARD_GLOO_INCLUDE -u TRAINYARD_BUILD_DIR -u trainyard_locate_later)

# --- 1. Default torch, first install: sourced before the environment exists ---------------
cache="$tmp/cache"
out="$("${clean_env[@]}" TRAINYARD_CACHE="$cache" bash -c '
  set -euo pipefail
  trainyard_locate_later=1
  source "$1/scripts/torch-env.sh"
  # Before the environment exists, what it holds is unset: a use stops under set -u.
  if (echo "$trainyard_torch_dir") 2>/dev/null; then echo "derived value set before the environment exists"; exit 1; fi
  echo "venv=$TRAINYARD_VENV"
  # The torch step: a real venv, its torch the build'\''s (linked, not copied).
  "$2" -m venv --without-pip "$TRAINYARD_VENV"
  ln -s "$3" "$TRAINYARD_VENV/lib/$4/site-packages/torch"
  trainyard_torch_locate
  echo "dir=$trainyard_torch_dir"
  echo "cuda=$trainyard_torch_cuda"
  echo "lib=$trainyard_libtorch_cpu"
  echo "cmake=$TRAINYARD_TORCH_CMAKE_PREFIX"
  echo "pin=$(trainyard_nvjpeg_pin_for "$trainyard_torch_cuda")"
  python3 "$1/scripts/check-gloo-headers.py" "$5" "$trainyard_libtorch_cpu" > /dev/null && echo "gloo=match"
' _ "$src" "$python" "$torch_dir" "$pyver" "$gloo")" || fail "default torch, first install: $out"
venv="$cache/torch-2.15.0"
grep -qxF "venv=$venv" <<< "$out" || fail "the default environment is not $venv: $out"
grep -qxF "dir=$venv/lib/$pyver/site-packages/torch" <<< "$out" || fail "torch folder not found after the environment appeared: $out"
grep -qxF "cuda=$real_cuda" <<< "$out" || fail "CUDA not read from the new environment (expected $real_cuda): $out"
grep -qxF "lib=$venv/lib/$pyver/site-packages/torch/lib/libtorch_cpu.so" <<< "$out" || fail "libtorch_cpu.so: $out"
grep -qxF "cmake=$venv/lib/$pyver/site-packages/torch/share/cmake" <<< "$out" || fail "CMake prefix: $out"
case "$real_cuda" in 13.[0-3]) grep -q '^pin=nvidia-nvjpeg==13\.' <<< "$out" || fail "no nvJPEG pin for CUDA $real_cuda: $out" ;; esac
grep -qxF "gloo=match" <<< "$out" || fail "the Gloo headers were not checked against the new environment's library: $out"

# --- 2. Sourced as build.sh sources it, before any install: one error line, exit 2 ---------
rc=0
berr="$("${clean_env[@]}" TRAINYARD_CACHE="$tmp/empty" TRAINYARD_BUILD_DIR="$tmp/build" bash "$src/scripts/build.sh" 2>&1)" || rc=$?
[ "$rc" -eq 2 ] || fail "build.sh without a torch: exit $rc, expected 2: $berr"
[ "$(grep -c '^error: build: no LibTorch in '"$tmp/empty"'/torch-2.15.0' <<< "$berr")" -eq 1 ] ||
  fail "build.sh without a torch: expected one error line naming the environment: $berr"

# --- 3. install-deps with an environment marked complete that holds no torch ---------------
# (the torch step done, its product broken): one error line after the step, not a traceback.
mkdir -p "$tmp/broken/torch-2.15.0"
touch "$tmp/broken/torch-2.15.0/.complete"
rc=0
ierr="$("${clean_env[@]}" TRAINYARD_CACHE="$tmp/broken" bash "$src/scripts/install-deps.sh" 2>&1)" || rc=$?
[ "$rc" -eq 2 ] || fail "install-deps on an environment without torch: exit $rc, expected 2: $ierr"
grep -q "^error: install-deps: torch 2.15.0 in $tmp/broken/torch-2.15.0 has no lib/libtorch_cpu.so" <<< "$ierr" ||
  fail "install-deps on an environment without torch: no error line naming it: $ierr"
grep -q "remove $tmp/broken/torch-2.15.0 and run install-deps again" <<< "$ierr" || fail "no hint: $ierr"
! grep -q 'Traceback' <<< "$ierr" || fail "a traceback: $ierr"

# --- 4. TRAINYARD_TORCH_PYTHON and TRAINYARD_TORCH_DIR: located when sourced ----------------
for how in python dir; do
  if [ "$how" = python ]; then named=(TRAINYARD_TORCH_PYTHON="$python"); else named=(TRAINYARD_TORCH_DIR="$torch_dir"); fi
  out="$("${clean_env[@]}" TRAINYARD_CACHE="$tmp/ext" "${named[@]}" bash -c '
    set -euo pipefail
    trainyard_locate_later=1   # ignored: a torch named from outside exists already
    source "$1/scripts/torch-env.sh"
    echo "dir=$(realpath "$trainyard_torch_dir")"
    echo "cuda=$trainyard_torch_cuda"
    echo "lib=$trainyard_libtorch_cpu"
    echo "gloo_include=$TRAINYARD_GLOO_INCLUDE"
  ' _ "$src")" || fail "TRAINYARD_TORCH_${how^^}: $out"
  version="$(sed -n "s/^__version__ = '\([^'+]*\).*/\1/p" "$torch_dir/version.py")"
  grep -qxF "dir=$(realpath "$torch_dir")" <<< "$out" || fail "TRAINYARD_TORCH_${how^^}: torch folder: $out"
  grep -qxF "cuda=$real_cuda" <<< "$out" || fail "TRAINYARD_TORCH_${how^^}: CUDA: $out"
  grep -q "^lib=.*/lib/libtorch_cpu.so$" <<< "$out" || fail "TRAINYARD_TORCH_${how^^}: libtorch_cpu.so: $out"
  grep -qxF "gloo_include=$tmp/ext/gloo-$version/include" <<< "$out" || fail "TRAINYARD_TORCH_${how^^}: Gloo folder: $out"
done

# --- 5. TRAINYARD_TORCH_VERSION=2.11.0: its own environment, CUDA and pin once it exists -----
out="$("${clean_env[@]}" TRAINYARD_CACHE="$tmp/v211" TRAINYARD_TORCH_VERSION=2.11.0 bash -c '
  set -euo pipefail
  trainyard_locate_later=1
  source "$1/scripts/torch-env.sh"
  echo "venv=$TRAINYARD_VENV gloo_include=$TRAINYARD_GLOO_INCLUDE"
  # What torch 2.11.0+cu130 writes in its version.py (the only file read for the CUDA version).
  mkdir -p "$TRAINYARD_VENV/lib/python3.11/site-packages/torch"
  printf "__version__ = '"'"'2.11.0+cu130'"'"'\ncuda: Optional[str] = '"'"'13.0'"'"'\n" \
    > "$TRAINYARD_VENV/lib/python3.11/site-packages/torch/version.py"
  trainyard_torch_locate
  echo "cuda=$trainyard_torch_cuda pin=$(trainyard_nvjpeg_pin_for "$trainyard_torch_cuda") lib=$trainyard_libtorch_cpu"
' _ "$src")" || fail "TRAINYARD_TORCH_VERSION=2.11.0: $out"
grep -qxF "venv=$tmp/v211/torch-2.11.0 gloo_include=$tmp/v211/gloo-2.11.0/include" <<< "$out" || fail "2.11.0's folders: $out"
grep -qxF "cuda=13.0 pin=nvidia-nvjpeg==13.0.3.75 lib=" <<< "$out" || fail "2.11.0's CUDA and nvJPEG pin: $out"

echo "ok"
