#!/usr/bin/env bash
# Is the install complete? Checks what scripts/install-deps.sh puts in place
# for the torch that scripts/torch-env.sh names: LibTorch (its CMake package
# and libtorch_cpu.so), the Gloo headers checked against it, nvJPEG (where
# torch's CUDA has a pin) and the Python readers the tests use. One line per
# part; the first missing part is one `error:` line and exit 2. CI runs it
# after a first install into an empty cache (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/torch-env.sh
fail() { echo "error: check-install: $*; run scripts/install-deps.sh" >&2; exit 2; }

[ -n "$trainyard_libtorch_cpu" ] && [ -d "$TRAINYARD_TORCH_CMAKE_PREFIX/Torch" ] ||
  fail "no LibTorch in ${TRAINYARD_VENV:-$trainyard_torch_dir}; expected torch $TRAINYARD_TORCH_VERSION with lib/libtorch_cpu.so and share/cmake/Torch"
echo "check-install: torch $TRAINYARD_TORCH_VERSION (CUDA $trainyard_torch_cuda) in $trainyard_torch_dir"

stamp="$TRAINYARD_GLOO_INCLUDE/.complete"
[ -f "$TRAINYARD_GLOO_INCLUDE/gloo/rendezvous/store.h" ] && grep -qF "checked against torch $TRAINYARD_TORCH_VERSION" "$stamp" 2>/dev/null ||
  fail "no Gloo headers checked against torch $TRAINYARD_TORCH_VERSION in $TRAINYARD_GLOO_INCLUDE; expected gloo/rendezvous/store.h and $stamp"
echo "check-install: Gloo headers: $(head -n1 "$stamp"), $(sed -n 2p "$stamp")"

if [ -n "$TRAINYARD_TORCH_EXTERNAL" ]; then
  echo "check-install: nvJPEG and the readers: not installed into a torch environment we did not make ($trainyard_torch_dir)"
  exit 0
fi

# What the environment's Python says it holds: torch's version (still the one the
# environment was made for), nvidia-nvjpeg's, and the readers that do not import
# (the tests' readers; install-deps.sh installs them under their PyPI names).
readers=(tensorboard mlflow pandas skimage torchvision webdataset pytorch_metric_learning safetensors torch_tb_profiler torchmetrics)
said="$("$TRAINYARD_PYTHON" - "${readers[@]}" <<'EOF' 2>&1
import importlib.metadata as md, importlib.util as u, sys
def version(dist):
    try:
        return md.version(dist).split("+")[0]
    except md.PackageNotFoundError:
        return "none"
missing = [m for m in sys.argv[1:] if u.find_spec(m) is None]
print(version("torch"), version("nvidia-nvjpeg"), " ".join(missing))
EOF
)" || fail "$TRAINYARD_PYTHON could not be asked for its packages ($said); expected the environment install-deps made"
read -r torch_now nvjpeg_now missing <<< "$said"
[ "$torch_now" = "$TRAINYARD_TORCH_VERSION" ] ||
  fail "$TRAINYARD_VENV holds torch $torch_now; expected $TRAINYARD_TORCH_VERSION (a reader changed it)"

pin="$(trainyard_nvjpeg_pin_for "$trainyard_torch_cuda")"
if [ -n "$pin" ]; then
  # Where the build looks (plugins/image_datasets/CMakeLists.txt): nvidia/*/ beside torch.
  nvjpeg="$(ls "$trainyard_torch_dir"/../nvidia/*/lib/libnvjpeg.so.* 2>/dev/null | head -n1 || true)"
  header="$(ls "$trainyard_torch_dir"/../nvidia/*/include/nvjpeg.h 2>/dev/null | head -n1 || true)"
  [ -n "$nvjpeg" ] && [ -n "$header" ] && [ "nvidia-nvjpeg==$nvjpeg_now" = "$pin" ] ||
    fail "nvJPEG beside torch in $TRAINYARD_VENV: nvidia-nvjpeg $nvjpeg_now, library '${nvjpeg:-none}', header '${header:-none}';" \
         "expected $pin for CUDA $trainyard_torch_cuda"
  echo "check-install: nvJPEG: $pin ($(realpath "$nvjpeg"))"
else
  echo "check-install: nvJPEG: none pinned for CUDA $trainyard_torch_cuda (decode: gpu unavailable)"
fi

[ -z "${missing:-}" ] || fail "the readers $missing are missing from $TRAINYARD_VENV; expected ${readers[*]}"
echo "check-install: readers: ${readers[*]}"
