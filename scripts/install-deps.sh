#!/usr/bin/env bash
# Installs everything trainyard needs to build, test and run its demo:
#   1. Debian packages (toolchain, yaml-cpp, Boost, OpenCV, LMDB, GoogleTest, data);
#   2. LibTorch: PyPI's CUDA-enabled `torch` wheel in a virtual environment,
#      cached under $TRAINYARD_CACHE (default ~/.cache/trainyard), one per version;
#   3. the Gloo headers that the wheel does not ship (c10d's ProcessGroupGloo.hpp
#      includes them), unpacked from Debian forky's (or sid's) libgloo-dev into
#      the cache and checked against the library (scripts/check-gloo-headers.py).
# Idempotent: each part is skipped when present. Prints where LibTorch is, for
# scripts/build.sh (which sources scripts/torch-env.sh).
# A fresh install downloads about 3.0 GB (torch 539 MB, the nvidia-* CUDA
# wheels the rest) and took 98 s here; docs/building.md has the measurement.
# Nothing derived from the torch environment is read before the step that
# makes it (trainyard_locate_later below; tests/scripts/torch_env_test.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The choice only (which torch, where its environment goes): what the
# environment holds is located after the step that makes it, below; until
# then those variables are unset, and `set -u` stops any earlier use.
trainyard_locate_later=1
# shellcheck source=torch-env.sh
source "$here/torch-env.sh"

packages=(
  # toolchain; python3-venv for the LibTorch environment
  build-essential cmake pkg-config ccache git zlib1g-dev python3-venv
  # scripts/package.sh: the packed binaries find their libraries relative to themselves
  patchelf
  # whole-buffer gzip decompression, 3x zlib's speed (the Fashion-MNIST plugin's start-up)
  libdeflate-dev
  # configuration, CLI, plugin loading; JSON for every file the host writes or reads
  libyaml-cpp-dev nlohmann-json3-dev libspdlog-dev libboost-dev libboost-program-options-dev libboost-filesystem-dev
  # the data pipeline: packed datasets and image augmentation (OpenCV's core
  # and imgproc); images decode through their own libraries (trainyard/image_codec.h),
  # not OpenCV's imgcodecs, whose Debian build links GDAL, GDCM and OpenEXR
  liblmdb-dev libopencv-core-dev libopencv-imgproc-dev lmdb-utils libpng-dev libwebp-dev libtiff-dev
  # JPEG decode straight to BGR at 1/2-1/8 scale (libjpeg-turbo's libjpeg API)
  libjpeg-dev
  # tests: GoogleTest; protoc and Python's protobuf to read TensorBoard files
  # back independently; Chromium to render the HTML report headless
  libgtest-dev protobuf-compiler python3-protobuf chromium
  # the MLflow logger's REST client (a tracking server)
  libcurl4-openssl-dev
  # tests: a real single-node Slurm cluster (tests/slurm/cluster.sh)
  slurmctld slurmd slurm-client munge
  # tests: the console's live line in a real terminal of a given width
  tmux
  # tests: the C++ sources follow .clang-format (scripts/check-format.sh)
  clang-format
  # real data for the demo and the end-to-end tests
  dataset-fashion-mnist
)

sudo=""
need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "error: install-deps: $1 and not root; run as root or install sudo" >&2; exit 2; }
    sudo="sudo"
  fi
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} Debian packages present"
else
  need_root "missing packages (${missing[*]})"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  # On another Debian-based system (the Ubuntu images GPU machines run), a
  # package Debian has and it lacks (chromium is a snap there) is left out
  # with a warning: the tests that need it say so; the GPU suite needs none.
  if ! grep -qx 'ID=debian' /etc/os-release 2>/dev/null; then
    available=()
    for p in "${missing[@]}"; do
      if apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: [0-9a-z]'; then available+=("$p")
      else echo "install-deps: warning: $(. /etc/os-release && echo "$PRETTY_NAME") has no package '$p'; left out" >&2; fi
    done
    missing=("${available[@]}")
  fi
  echo "install-deps: installing ${missing[*]}"
  [ ${#missing[@]} -eq 0 ] || $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# nvcc: LibTorch's CMake package enables the CUDA language when the wheel has
# CUDA, and needs a toolkit >= 12.6 to configure (nothing CUDA runs at build time).
if ! command -v nvcc >/dev/null && [ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
  echo "error: install-deps: no CUDA toolkit (nvcc) found on PATH or in \${CUDA_HOME:-/usr/local/cuda};" \
       "expected CUDA >= 12.6 to build against the CUDA-enabled LibTorch; install NVIDIA's CUDA toolkit" >&2
  exit 2
fi

mkdir -p "$TRAINYARD_CACHE"

# --- LibTorch ------------------------------------------------------------------
# PyPI's wheel in our own environment, or the torch named by
# TRAINYARD_TORCH_PYTHON / TRAINYARD_TORCH_DIR (scripts/torch-env.sh), which
# is used as it is: nothing is installed into an environment we did not make.
if [ -n "$TRAINYARD_TORCH_EXTERNAL" ]; then
  echo "install-deps: using torch $TRAINYARD_TORCH_VERSION in $trainyard_torch_dir as it is (nothing installed into it)"
elif [ -f "$TRAINYARD_VENV/.complete" ]; then
  echo "install-deps: torch $TRAINYARD_TORCH_VERSION present in $TRAINYARD_VENV"
else
  echo "install-deps: installing torch $TRAINYARD_TORCH_VERSION (about 3 GB) into $TRAINYARD_VENV"
  rm -rf "$TRAINYARD_VENV"
  python=python3
  "$python" -m venv --help >/dev/null 2>&1 || python=/usr/bin/python3
  "$python" -m venv "$TRAINYARD_VENV" ||
    { echo "error: install-deps: $python -m venv $TRAINYARD_VENV failed (above); expected Python 3 with venv and" \
           "ensurepip (Debian: python3-venv)" >&2; exit 2; }
  start=$(date +%s)
  # numpy: torch warns without it; the tests export TorchScript models with this Python.
  { "$TRAINYARD_VENV/bin/pip" install -q --upgrade pip && "$TRAINYARD_VENV/bin/pip" install -q "torch==$TRAINYARD_TORCH_VERSION" numpy; } ||
    { echo "error: install-deps: pip could not install torch==$TRAINYARD_TORCH_VERSION into $TRAINYARD_VENV (above);" \
           "expected PyPI's wheel (about 3 GB); check the network and disk space, or set TRAINYARD_TORCH_VERSION" >&2; exit 2; }
  # The wheel's c10d backends, asked without a traceback on failure.
  backends="$("$TRAINYARD_VENV/bin/python" -c "import torch.distributed as d; print(d.is_nccl_available(), d.is_gloo_available())" 2>&1 |
              tail -n1 || true)"
  if [ "$backends" != "True True" ]; then
    echo "error: install-deps: torch $TRAINYARD_TORCH_VERSION in $TRAINYARD_VENV: NCCL and Gloo available: '$backends';" \
         "expected True True (PyPI's CUDA-enabled Linux wheel)" >&2
    exit 2
  fi
  touch "$TRAINYARD_VENV/.complete"
  echo "install-deps: torch installed in $(( $(date +%s) - start )) s ($(du -sh "$TRAINYARD_VENV" | cut -f1) on disk)"
fi
# Everything below is derived from the environment as it is now, after the
# step that makes it: its torch folder, CUDA version, libtorch_cpu.so.
trainyard_torch_locate
if [ -z "$trainyard_libtorch_cpu" ] || [ -z "$TRAINYARD_TORCH_CMAKE_PREFIX" ]; then
  if [ -n "$TRAINYARD_VENV" ]; then where="$TRAINYARD_VENV"; hint="remove $TRAINYARD_VENV and run install-deps again"
  else where="${TRAINYARD_TORCH_DIR:-$TRAINYARD_PYTHON}"; hint="name a complete torch install"; fi
  echo "error: install-deps: torch $TRAINYARD_TORCH_VERSION in $where has no lib/libtorch_cpu.so or share/cmake" \
       "(torch folder: '${trainyard_torch_dir:-none found}'); expected PyPI's torch wheel there; $hint" >&2
  exit 2
fi

# --- Readers the tests check trainyard's files with -----------------------------
# TensorBoard's own event reader (and hparams protos), MLflow (its client,
# with pandas for mlflow.search_runs, and its tracking server); for the photo
# set: scikit-image (its wheel ships the photographs the set is cut from),
# torchvision (PyTorch's image pipeline, the benchmark's other side; its PIL
# path needs none of its C++ ops), webdataset (reads the shards trainyard
# writes), pytorch-metric-learning (the reference the metric-learning losses
# are checked against), torchmetrics (the reference the miou meter is checked
# against), pycocotools and faster-coco-eval (the references the coco_map
# meter is checked against), safetensors (reads `export --format safetensors`) and
# torch-tb-profiler (TensorBoard's PyTorch profiler view: reads `run --profile`'s
# traces; 0.4.3 is its last release). Pinned, into the same environment as
# torch, whose Python the tests run. torchvision is pinned per torch version
# (each release accepts one torch minor: 0.26 for 2.11 ... 0.29 for 2.14;
# 0.29.2, the newest on PyPI, also installs beside 2.15), and every reader is
# installed under a constraint that holds torch at the environment's version:
# a reader never changes the torch trainyard builds against (an unpinned
# torchvision 0.29.2 alone would pull torch 2.15 into a 2.11 environment).
torch_minor="${TRAINYARD_TORCH_VERSION#2.}"; torch_minor="${torch_minor%%.*}"
torchvision_pin="torchvision==0.29.2"
if [[ $TRAINYARD_TORCH_VERSION == 2.* ]] && [ "$torch_minor" -lt 15 ] 2>/dev/null; then
  torchvision_pin="torchvision==0.$(( torch_minor + 15 )).*"
fi
readers=(tensorboard==2.21.0 mlflow==3.17.2 pandas==3.1.1 scikit-image==0.26.0 "$torchvision_pin" webdataset==1.0.2
         pytorch-metric-learning==2.9.0 safetensors==0.8.0 torch-tb-profiler==0.4.3 torchmetrics==1.9.0
         pycocotools==2.0.11 faster-coco-eval==1.8.0)
if [ -n "$TRAINYARD_TORCH_EXTERNAL" ]; then
  echo "install-deps: the readers (${readers[*]}) are not installed into $trainyard_torch_dir's environment;" \
       "the tests that read trainyard's files with them fail there (docs/building.md: the torch check's part of the suite)"
elif [ "$(cat "$TRAINYARD_VENV/.readers" 2>/dev/null)" != "${readers[*]}" ]; then
  echo "install-deps: installing ${readers[*]} into $TRAINYARD_VENV (torch held at $TRAINYARD_TORCH_VERSION)"
  constraint="$TRAINYARD_VENV/.torch-constraint.txt"
  echo "torch==$TRAINYARD_TORCH_VERSION" > "$constraint"
  if ! "$TRAINYARD_VENV/bin/pip" install -q -c "$constraint" "${readers[@]}"; then
    echo "error: install-deps: the readers (${readers[*]}) cannot be installed beside torch $TRAINYARD_TORCH_VERSION;" \
         "expected releases that accept it; pin older ones in scripts/install-deps.sh" >&2
    exit 2
  fi
  now="$("$TRAINYARD_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("torch").split("+")[0])' 2>&1 | tail -n1 || true)"
  if [ "$now" != "$TRAINYARD_TORCH_VERSION" ]; then
    echo "error: install-deps: installing the readers changed torch in $TRAINYARD_VENV from $TRAINYARD_TORCH_VERSION to $now" >&2
    exit 2
  fi
  echo "${readers[*]}" > "$TRAINYARD_VENV/.readers"
fi

# --- nvJPEG ------------------------------------------------------------------------
# `decode: gpu` (docs/data.md) decodes JPEGs with nvJPEG, from PyPI's
# nvidia-nvjpeg wheel (4 MB: nvjpeg.h and libnvjpeg.so.13) installed beside the
# nvidia-* wheels torch brought, pinned to the release of torch's CUDA minor:
# the image_datasets plugin compiles against its header and loads the library
# at run time (a machine without it trains with `decode: cpu` and says why
# `decode: gpu` is unavailable). Not for a torch we did not install, nor a CPU
# build; nvJPEG for CUDA 12 is another package (nvidia-nvjpeg-cu12).
torch_cuda="$trainyard_torch_cuda"
nvjpeg_pin="$(trainyard_nvjpeg_pin_for "$torch_cuda")"
if [ -n "$TRAINYARD_TORCH_EXTERNAL" ]; then
  echo "install-deps: nvJPEG is not installed into $trainyard_torch_dir's environment;" \
       "decode: gpu works where it has nvidia-nvjpeg (${nvjpeg_pin:-for CUDA $torch_cuda})"
elif [ -z "$nvjpeg_pin" ]; then
  echo "install-deps: no nvidia-nvjpeg pinned for torch's CUDA $torch_cuda; decode: gpu will be unavailable"
elif [ "$(cat "$TRAINYARD_VENV/.nvjpeg" 2>/dev/null)" != "$nvjpeg_pin" ]; then
  echo "install-deps: installing $nvjpeg_pin into $TRAINYARD_VENV"
  echo "torch==$TRAINYARD_TORCH_VERSION" > "$TRAINYARD_VENV/.torch-constraint.txt"
  if ! "$TRAINYARD_VENV/bin/pip" install -q --no-deps -c "$TRAINYARD_VENV/.torch-constraint.txt" "$nvjpeg_pin"; then
    echo "error: install-deps: $nvjpeg_pin cannot be installed from PyPI; expected the nvJPEG wheel for CUDA $torch_cuda" >&2
    exit 2
  fi
  echo "$nvjpeg_pin" > "$TRAINYARD_VENV/.nvjpeg"
else
  echo "install-deps: $nvjpeg_pin present in $TRAINYARD_VENV"
fi

# --- Gloo headers ---------------------------------------------------------------
# The wheel links Gloo statically into libtorch_cpu.so and exports its symbols,
# but ships none of its headers. Debian's libgloo-dev from forky (else sid) is
# the nearest packaged Gloo: 2025-09, against the wheel's 2026 Gloo, with the
# same virtual interfaces (trixie's 2023 headers compile but disagree with the
# library's vtables). scripts/check-gloo-headers.py is the gate: it compares
# the headers with the symbols and vtables libtorch_cpu.so exports, and runs
# again whenever the torch version changes.
stamp="$TRAINYARD_GLOO_INCLUDE/.complete"
if [ -f "$stamp" ] && grep -qF "torch $TRAINYARD_TORCH_VERSION" "$stamp"; then
  echo "install-deps: Gloo headers present in $TRAINYARD_GLOO_INCLUDE ($(head -n1 "$stamp"))"
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  # The machine's own Debian mirror, with a newer suite in a private apt
  # state: the system's sources and package lists stay as they are.
  mirror="$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
            | grep -oE '[a-z]+://[^ ]*/debian/?$' | head -n1 || true)"
  # Not a Debian system (Ubuntu): Debian's own mirror, with Debian's keyring.
  if [ -z "$mirror" ]; then
    mirror="http://deb.debian.org/debian"
    echo "install-deps: no Debian mirror in /etc/apt/sources.list{,.d}; using $mirror for libgloo-dev's headers"
    if [ ! -f /usr/share/keyrings/debian-archive-keyring.gpg ]; then
      need_root "Debian's archive keyring is missing"
      $sudo apt-get install -y -qq --no-install-recommends debian-archive-keyring >/dev/null ||
        { echo "error: install-deps: cannot install debian-archive-keyring, expected to verify Debian's libgloo-dev;" \
               "set TRAINYARD_GLOO_INCLUDE to a folder with Gloo headers matching torch $TRAINYARD_TORCH_VERSION" >&2; exit 2; }
    fi
  fi
  found=""
  for suite in forky sid; do
    mkdir -p "$work/$suite/lists/partial" "$work/$suite/archives/partial" "$work/$suite/root"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" > "$work/$suite/sources.list"
    apt_private=(-o Dir::Etc::SourceList="$work/$suite/sources.list" -o Dir::Etc::SourceParts=/dev/null
                 -o Dir::State::Lists="$work/$suite/lists" -o Dir::Cache::Archives="$work/$suite/archives"
                 -o APT::Sandbox::User=root -qq)
    echo "install-deps: fetching Debian $suite's libgloo-dev (headers only)"
    apt-get "${apt_private[@]}" update || continue
    (cd "$work/$suite" && apt-get "${apt_private[@]}" download libgloo-dev) || continue
    dpkg-deb -x "$work/$suite"/libgloo-dev_*.deb "$work/$suite/root"
    version="$(dpkg-deb -f "$work/$suite"/libgloo-dev_*.deb Version)"
    # 0: they match; 1: they differ (the next suite may match); 2: nothing could be checked.
    checked=0
    python3 "$here/check-gloo-headers.py" "$work/$suite/root/usr/include" "$trainyard_libtorch_cpu" \
      > "$work/$suite/check.txt" 2> "$work/$suite/check.err" || checked=$?
    if [ "$checked" -eq 0 ]; then
      found="$suite"
      break
    elif [ "$checked" -ne 1 ]; then
      why="$(sed -n 's/^error: check-gloo-headers: //p' "$work/$suite/check.err" | head -n1)"
      echo "error: install-deps: $suite's libgloo-dev $version could not be checked against torch" \
           "$TRAINYARD_TORCH_VERSION: ${why:-scripts/check-gloo-headers.py ended with exit $checked}" >&2
      exit 2
    fi
    echo "install-deps: $suite's libgloo-dev $version does not match torch $TRAINYARD_TORCH_VERSION's Gloo:" >&2
    grep MISMATCH "$work/$suite/check.txt" | head -n 5 >&2 || true
  done
  if [ -z "$found" ]; then
    echo "error: install-deps: no Debian libgloo-dev matches the Gloo inside torch $TRAINYARD_TORCH_VERSION (see above);" \
         "expected headers that pass scripts/check-gloo-headers.py; set TRAINYARD_GLOO_INCLUDE to a folder with matching gloo/*.h" >&2
    exit 2
  fi
  rm -rf "$TRAINYARD_GLOO_INCLUDE"
  mkdir -p "$TRAINYARD_GLOO_INCLUDE"
  cp -r "$work/$found/root/usr/include/gloo" "$TRAINYARD_GLOO_INCLUDE/"
  printf 'libgloo-dev %s (Debian %s)\nchecked against torch %s by scripts/check-gloo-headers.py\n' \
    "$version" "$found" "$TRAINYARD_TORCH_VERSION" > "$stamp"
  echo "install-deps: Gloo headers from $found's libgloo-dev $version match torch $TRAINYARD_TORCH_VERSION"
fi
echo "install-deps: done (LibTorch: $TRAINYARD_TORCH_CMAKE_PREFIX)"
