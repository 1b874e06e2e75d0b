#!/usr/bin/env bash
# Installs every Debian package trainyard needs to build, test and run its demo.
# Idempotent: packages already present are skipped, and `apt-get update` runs
# only when something is missing. Needs root (or sudo) only when it installs.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake pkg-config ccache git zlib1g-dev
  # LibTorch (CPU, with Gloo) and the c10d Gloo headers it needs
  libtorch-dev libgloo-dev
  # An optimized BLAS: Debian's LibTorch otherwise calls the reference libblas3.
  # The OpenMP build follows at::set_num_threads (the pthread one ignores it);
  # see docs/performance.md for the measurement.
  libopenblas0-openmp
  # configuration, CLI, plugin loading
  libyaml-cpp-dev libboost-dev libboost-program-options-dev libboost-filesystem-dev
  # the data pipeline: packed datasets and image decoding/augmentation
  liblmdb-dev libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev lmdb-utils
  # tests: GoogleTest; PyTorch to export TorchScript models; protoc and Python's
  # protobuf to read TensorBoard files back independently; Chromium to render
  # the HTML report headless
  libgtest-dev python3-torch protobuf-compiler python3-protobuf chromium
  # real data for the demo and the end-to-end tests
  dataset-fashion-mnist
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "error: install-deps: missing packages (${missing[*]}) and not root; run as root or install sudo" >&2; exit 2; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
