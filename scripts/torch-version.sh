# Sourced by scripts/torch-env.sh, and by a package's share/package-env.sh
# (scripts/package.sh copies it there): what a torch folder holds, read from
# its version.py (or an unpacked LibTorch's build-version) without importing
# torch, which takes seconds. Neither fails: an unreadable folder prints "".
# The torch version as the folder says it ("2.11.0+cu130").
trainyard_torch_version_in() {
  if [ -f "$1/version.py" ]; then
    sed -n "s/^__version__ = '\([^']*\)'.*/\1/p" "$1/version.py" | head -n1 || true
  elif [ -f "$1/build-version" ]; then  # LibTorch's zip
    head -n1 "$1/build-version" || true
  fi
}
# The CUDA version that torch was built with ("13.0"), or "none" (a CPU build).
trainyard_torch_cuda_in() {
  local cuda=""
  [ -f "$1/version.py" ] &&
    cuda="$(sed -n "s/^cuda: .* = '\([^']*\)'.*/\1/p; s/^cuda = '\([^']*\)'.*/\1/p" "$1/version.py" | head -n1 || true)"
  echo "${cuda:-none}"
}
