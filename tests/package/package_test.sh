#!/usr/bin/env bash
# scripts/package.sh's tarball, unpacked in another folder and moved again,
# runs against a torch named at run time: --version, a CPU training, part of
# the suite from the package; its binaries name no path of the build machine,
# carry no GDAL/GDCM/OpenEXR, lib/ holds libnvjpeg.so.13 when the build names
# one, and a torch of another version or CUDA major, or a Python without torch,
# is one error line with exit 2.
# Usage: package_test.sh BUILD_DIR SOURCE_DIR PYTHON SCRATCH
set -euo pipefail
build="$1" source="$2" python="$3" scratch="$4"
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$scratch"; mkdir -p "$scratch"

TRAINYARD_BUILD_DIR="$build" bash "$source/scripts/package.sh" "$scratch/dist" | tee "$scratch/package.log"
tarball="$(ls "$scratch"/dist/trainyard-*.tar.gz)"
mkdir -p "$scratch/unpacked" && tar -xzf "$tarball" -C "$scratch/unpacked"
# Relocatable: moved after unpacking, it still runs.
mv "$scratch/unpacked/$(ls "$scratch/unpacked")" "$scratch/moved"
pkg="$scratch/moved"
export TRAINYARD_TORCH_PYTHON="$python"

# Nothing of the build machine's paths, nothing of imgcodecs' closure.
for f in "$pkg"/build/bin/trainyard "$pkg"/build/plugins/*.so "$pkg"/lib/*.so*; do
  runpath="$(readelf -d "$f" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')"
  tr ':' '\n' <<< "$runpath" | grep -v '^$' | grep -qv '^\$ORIGIN' && fail "$f has RUNPATH '$runpath' (an absolute entry)"
done
heavy="$(ls "$pkg/lib" | grep -E '^(libgdal|libgdcm|libOpenEXR|libopencv_imgcodecs)' || true)"
[ -z "$heavy" ] || fail "the package carries $heavy"
ls "$pkg/lib" | grep -q '^libopencv_core' || fail "the package carries no libopencv_core: $(ls "$pkg/lib")"
! ls "$pkg/lib" | grep -qE '^(libtorch|libc10|libc\.so|libstdc\+\+)' || fail "the package carries torch or the C/C++ runtime"
# nvJPEG (decode: gpu) travels in lib/ when the build names one; the plugin dlopens it by soname.
if [ -n "$(sed -n 's/^TRAINYARD_NVJPEG_LIBRARY:[A-Z]*=//p' "$build/CMakeCache.txt")" ]; then
  [ -f "$pkg/lib/libnvjpeg.so.13" ] || fail "the build names nvJPEG, the package's lib/ lacks libnvjpeg.so.13: $(ls "$pkg/lib")"
  grep -q 'nvJPEG carried' "$scratch/package.log" || fail "package.sh's last line does not say nvJPEG is carried"
else
  grep -q 'no nvJPEG' "$scratch/package.log" || fail "the build names no nvJPEG, package.sh does not say so"
fi

version="$("$pkg/bin/trainyard" --version)"
echo "$version"
grep -q "LibTorch $(sed -n 's/^TY_TORCH_VERSION=//p' "$pkg/share/build-info.sh")" <<< "$version" ||
  fail "--version does not name the package's torch: $version"
# Every library the running process maps comes from the package or that torch.
site="$(dirname "$("$python" -c 'import importlib.util as u; print(u.find_spec("torch").submodule_search_locations[0])')")"
"$pkg/bin/trainyard-env" sh -c 'exec env LD_TRACE_LOADED_OBJECTS=1 "$0"' "$pkg/build/bin/trainyard" > "$scratch/ldd.txt"
if grep -F "=> $(cd "$build" && pwd)/" "$scratch/ldd.txt" | grep -vF "=> $pkg/"; then
  fail "the packaged trainyard loads libraries from the build folder"
fi
if grep -v "=> $pkg/\|=> $site/\|=> /lib/\|=> /usr/lib/\|^[[:space:]]*linux-vdso\|^[[:space:]]*/lib64/ld-linux" "$scratch/ldd.txt"; then
  fail "the packaged trainyard maps a library from neither the package, that torch nor the system"
fi
# From the system: glibc's libraries and libstdc++/libgcc_s only.
system="$(grep -E "=> /(usr/)?lib/" "$scratch/ldd.txt" |
  grep -vE "/(libc|libm|libmvec|libstdc\+\+|libgcc_s|libdl|librt|libpthread|libutil|libresolv|libanl|libnsl)\.so" || true)"
[ -z "$system" ] || fail "the packaged trainyard maps system libraries besides glibc and libstdc++: $system"
grep -q "libtorch_cpu.so => $site/torch/lib/" "$scratch/ldd.txt" || fail "libtorch_cpu.so not from $site: $(grep libtorch_cpu "$scratch/ldd.txt")"

# It trains on the CPU (Fashion-MNIST, one epoch) and runs part of the suite.
"$pkg/bin/trainyard" run "$pkg/src/experiments/fashion_mnist_mlp.yaml" --output-dir "$scratch/runs" \
  --set loop.epochs=1 --set distributed.num_gpus=0 > "$scratch/run.log" 2>&1 || { cat "$scratch/run.log"; fail "training from the package"; }
grep -q '"phase": "test"' "$scratch/runs/fashion_mnist_mlp/metrics.jsonl" || fail "the packaged run wrote no test metrics"
"$pkg/bin/trainyard-tests" --gtest_filter='PluginLoader.*:Resume.*:ImageDecode.*' --gtest_brief=1 > "$scratch/tests.log" 2>&1 ||
  { tail -n 40 "$scratch/tests.log"; fail "tests from the package"; }
grep -q '\[  PASSED  \]' "$scratch/tests.log" || fail "no test passed from the package"
[ -d "$pkg/build/tests/tmp" ] || fail "the tests did not write under the package's build/tests/tmp"

# The device call, dry-run here without a GPU (docs/building.md): both parts
# say there is none, the benchmark's small CPU path runs, the files are written.
BENCH_GPU_CPU=1 PHOTOS=24 BATCH=4 CROP=32 EPOCHS=1 THREADS=1 PROFILE=1:3 BOUND_STEPS=2 PHOTO_SET="$scratch/photos" \
  bash "$pkg/src/scripts/device-check.sh" "$scratch/device-check" > "$scratch/device-check.log" 2>&1 ||
  { cat "$scratch/device-check.log"; fail "the device call's dry run"; }
for part in test-gpu.txt bench-gpu.txt timing.txt; do
  [ -s "$scratch/device-check/$part" ] || fail "the device call wrote no $part"
done
grep -q 'the GPU suite did not run' "$scratch/device-check/test-gpu.txt" || fail "test-gpu without a GPU: $(cat "$scratch/device-check/test-gpu.txt")"
grep -q '^device: CPU' "$scratch/device-check/bench-gpu.txt" || fail "bench-gpu's CPU path: $(tail -n 5 "$scratch/device-check/bench-gpu.txt")"
grep -q '^test-gpu: exit 0 in ' "$scratch/device-check/timing.txt" || fail "timing: $(cat "$scratch/device-check/timing.txt")"
grep -q '^bench-gpu: exit 0 in ' "$scratch/device-check/timing.txt" || fail "timing: $(cat "$scratch/device-check/timing.txt")"

# Another torch: one error line, exit 2, nothing run.
refused() {  # expected-text, then env assignments
  local expect="$1"; shift
  set +e; out="$(env "$@" "$pkg/bin/trainyard" --version 2>&1)"; rc=$?; set -e
  [ "$rc" -eq 2 ] || fail "exit $rc, expected 2, for $*: $out"
  [ "$(wc -l <<< "$out")" -eq 1 ] || fail "more than one line for $*: $out"
  grep -q "^error: trainyard package .*$expect" <<< "$out" || fail "for $*: '$out' lacks '$expect'"
}
torch_version="$(sed -n 's/^TY_TORCH_VERSION=//p' "$pkg/share/build-info.sh")"
cuda="$(sed -n 's/^TY_TORCH_CUDA=//p' "$pkg/share/build-info.sh")"
fake="$scratch/fake/torch"; mkdir -p "$fake/lib"; : > "$fake/lib/libtorch_cpu.so"
other_version=2.11.0; [ "$torch_version" = 2.11.0 ] && other_version=2.10.0
printf "__version__ = '%s+cu130'\ncuda: Optional[str] = '%s'\n" "$other_version" "$cuda" > "$fake/version.py"
refused "built against torch $torch_version with CUDA $cuda, but $fake .* is torch $other_version+cu130" TRAINYARD_TORCH_DIR="$fake"
printf "__version__ = '%s+cu126'\ncuda: Optional[str] = '12.6'\n" "$torch_version" > "$fake/version.py"
[ "${cuda%%.*}" != 12 ] && refused "with CUDA 12.6; expected the same torch version and CUDA major" TRAINYARD_TORCH_DIR="$fake"
refused "has no torch" TRAINYARD_TORCH_PYTHON=/usr/bin/python3
echo "package test: passed ($(du -h "$tarball" | cut -f1), $(ls "$pkg/lib" | wc -l) libraries carried)"
rm -rf "$scratch"
