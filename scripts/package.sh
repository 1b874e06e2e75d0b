#!/usr/bin/env bash
# Packs a build into a relocatable tarball for machines without network (GPU
# nodes of a cluster): it runs, unpacked anywhere, against that machine's own
# torch, which must be the torch the build was made against (same version and
# CUDA major; bin/ says so in one error line otherwise).
#   bash scripts/package.sh [OUT_DIR]          (default dist/)
# Packs the build in TRAINYARD_BUILD_DIR (default build/) of the torch
# scripts/torch-env.sh names; build it first (scripts/build.sh). To pack for a
# cluster's torch 2.11: TRAINYARD_TORCH_VERSION=2.11.0 TRAINYARD_BUILD_DIR=build-2.11
# bash scripts/install-deps.sh && ... scripts/build.sh && ... scripts/package.sh
# (or TRAINYARD_TORCH_PYTHON=/path/to/python of an environment that has it).
#
# The package, trainyard-VERSION-torchT-cuC/:
#   bin/trainyard         trainyard (share/package-env.sh finds and checks the torch)
#   bin/trainyard-tests   the test binary (--gtest_filter=...)
#   bin/test-gpu          the GPU suite with scripts/test-gpu.sh's checks and summary
#   bin/trainyard-env     any command in the package's environment (benchmarks)
#   build/                the build: executables, plugins, SDK libraries, test fixtures
#   src/                  the sources (experiments, scripts, test data the tests read)
#   lib/                  every other library the binaries need, except glibc,
#                         libstdc++ and torch's own; OpenCV is core and imgproc only;
#                         libnvjpeg.so.13 when the build names one (decode: gpu; the
#                         plugin dlopens it, so ldd does not list it)
#   share/build-info.sh   the torch, CUDA, glibc and libstdc++ versions it needs
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/torch-env.sh
build="$TRAINYARD_BUILD_DIR"
out="${1:-dist}"
fail() { echo "error: package: $*" >&2; exit 2; }
[ -x "$build/bin/trainyard" ] && [ -x "$build/bin/trainyard_tests" ] ||
  fail "no build in $build (bin/trainyard, bin/trainyard_tests); expected a finished build; run scripts/build.sh"
command -v patchelf >/dev/null || fail "no patchelf; expected it to rewrite the binaries' RUNPATH; run scripts/install-deps.sh"

# The torch this build was configured against (not whatever torch-env names now).
torch_cmake="$(sed -n 's/^Torch_DIR:PATH=//p' "$build/CMakeCache.txt")"
torch_dir="$(realpath -m "$torch_cmake/../../..")"
[ -f "$torch_dir/version.py" ] || fail "$build was configured against $torch_cmake, which is no longer a torch install;" \
                                       "expected the torch it was built with; rebuild"
torch_version="$(trainyard_torch_version_in "$torch_dir")"
torch_version="${torch_version%%+*}"
torch_cuda="$(trainyard_torch_cuda_in "$torch_dir")"
version="$("$build/bin/trainyard" --version 2>/dev/null | sed -n '1s/^trainyard \([^ ]*\).*/\1/p')"
[ -n "$version" ] || fail "$build/bin/trainyard --version did not run; expected a working build"
name="trainyard-$version-torch$torch_version-cu${torch_cuda//./}"
[ "$torch_cuda" = none ] && name="trainyard-$version-torch$torch_version-cpu"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pkg="$work/$name"
mkdir -p "$pkg/bin" "$pkg/lib" "$pkg/share" "$pkg/src"

# --- the build, without objects and scratch folders ------------------------------------
mkdir -p "$pkg/build"
(cd "$build" && find . \( -type f -o -type l \) ! -name '*.o' ! -name '*.a' ! -name '*.gch' ! -name '*.pch' \
   ! -path '*/CMakeFiles/*' ! -name '.ninja*' ! -path './tests/tmp/*' ! -path './Testing/*' -print0 |
   tar -cf - --null -T -) | tar -xf - -C "$pkg/build"
[ -x "$pkg/build/bin/trainyard" ] || fail "copying $build into the package failed"
# The scaffold's templates where a host outside the build tree looks for them.
mkdir -p "$pkg/build/share/trainyard/scaffold"
cp -r host/scaffold/templates/. "$pkg/build/share/trainyard/scaffold/"

# --- the sources: what git tracks (and new files it does not ignore) ------------------------
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -co --exclude-standard -z | tar -cf - --null -T - | tar -xf - -C "$pkg/src"
else
  tar -cf - --exclude='./build*' --exclude=./dist --exclude=./.git -C . . | tar -xf - -C "$pkg/src"
fi

# --- the binaries find their libraries relative to themselves ----------------------------
elves=()
while IFS= read -r -d '' f; do
  if [ "$(head -c 4 "$f" | od -An -c | tr -d ' \n')" = '177ELF' ]; then elves+=("$f"); fi
done < <(find "$pkg/build" -type f -print0)
for f in "${elves[@]}"; do
  strip --strip-unneeded "$f" 2>/dev/null || true
  # Keep the $ORIGIN entries; the absolute ones name this machine's build and torch.
  runpath="$(patchelf --print-rpath "$f" 2>/dev/null || true)"
  kept="$(tr ':' '\n' <<< "$runpath" | grep '^\$ORIGIN' | paste -sd: - || true)"
  if [ -n "$runpath" ]; then patchelf --set-rpath "$kept" "$f"; fi
done

# --- every other library they need, except the system's C/C++ runtimes and torch -----------
base='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec|libpthread|libdl\.so|librt\.so|libresolv|libutil\.so|libanl|libnsl|libBrokenLocale|libthread_db|libnss_|libstdc\+\+|libgcc_s)'
site="$(dirname "$torch_dir")"
search="$(realpath "$build")/lib:$torch_dir/lib:$(ls -d "$site"/nvidia/*/lib 2>/dev/null | paste -sd: -)"
for f in "${elves[@]}"; do LD_LIBRARY_PATH="$search" ldd "$f" 2>/dev/null | awk '/=> \// { print $1, $3 }'; done |
  sort -u > "$work/needed.txt"
if LD_LIBRARY_PATH="$search" ldd "${elves[@]}" 2>/dev/null | grep -q 'not found'; then
  fail "a packed binary needs a library this machine lacks: $(LD_LIBRARY_PATH="$search" ldd "${elves[@]}" 2>/dev/null |
        grep 'not found' | sort -u | head -n3 | tr -s ' \t' ' ' | paste -sd';' -)"
fi
while read -r soname path; do
  [[ $soname =~ $base ]] && continue
  case "$path" in "$site"/*|"$(realpath "$build")"/*|"$build"/*) continue ;; esac
  cp -L "$path" "$pkg/lib/$soname"
done < "$work/needed.txt"
# nvJPEG (decode: gpu): image_datasets dlopens libnvjpeg.so.13 by its soname, which
# package-env.sh's LD_LIBRARY_PATH finds in lib/; the build's CMake names the file.
nvjpeg="$(sed -n 's/^TRAINYARD_NVJPEG_LIBRARY:[A-Z]*=//p' "$build/CMakeCache.txt" | head -n1)"
if [ -n "$nvjpeg" ] && [ -f "$nvjpeg" ]; then
  cp -L "$nvjpeg" "$pkg/lib/"
  nvjpeg_note="nvJPEG carried"
else
  why="names none"; [ -z "$nvjpeg" ] || why="names $nvjpeg, which no longer exists"
  echo "package: no nvJPEG ($build/CMakeCache.txt's TRAINYARD_NVJPEG_LIBRARY $why);" \
       "decode: gpu is unavailable from this package, decode: cpu works"
  nvjpeg_note="no nvJPEG"
fi
# The closure the package exists to leave behind (OpenCV's imgcodecs pulls it in).
heavy="$(ls "$pkg/lib" | grep -E '^(libgdal|libgdcm|libOpenEXR|libopencv_imgcodecs)' || true)"
[ -z "$heavy" ] || fail "the binaries need $(echo $heavy); expected OpenCV's core and imgproc only (no imgcodecs)"
for f in "$pkg"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$f" 2>/dev/null || true; done

# --- what the machine must have: torch, and C/C++ runtimes no older than these ------------
newest() { sort -V | tail -n1; }
glibc="$(for f in "${elves[@]}" "$pkg"/lib/*; do objdump -T "$f" 2>/dev/null; done |
         grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | newest)"
glibcxx="$(for f in "${elves[@]}" "$pkg"/lib/*; do objdump -T "$f" 2>/dev/null; done |
           grep -o 'GLIBCXX_[0-9][0-9.]*' | sed 's/GLIBCXX_//' | newest)"
gcc_version="$(gcc -dumpfullversion 2>/dev/null || gcc -dumpversion)"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
cat > "$pkg/share/build-info.sh" <<INFO
# Written by scripts/package.sh on $(date -u +%Y-%m-%d) from $commit$(git diff --quiet HEAD 2>/dev/null || echo " (with local changes)").
TY_VERSION=$version
TY_TORCH_VERSION=$torch_version
TY_TORCH_CUDA=$torch_cuda
TY_GLIBC=$glibc
TY_GLIBCXX=$glibcxx
TY_GCC=$gcc_version
INFO
cp scripts/package/package-env.sh scripts/torch-version.sh "$pkg/share/"
cp scripts/package/trainyard scripts/package/trainyard-tests scripts/package/test-gpu scripts/package/trainyard-env "$pkg/bin/"
cat > "$pkg/README" <<README
trainyard $version for torch $torch_version (CUDA $torch_cuda), packed from $commit.
It uses the machine's own torch: the python3 on PATH, or TRAINYARD_TORCH_PYTHON=/path/to/python,
or TRAINYARD_TORCH_DIR=/path/to/site-packages/torch. It needs glibc >= $glibc and libstdc++ with GLIBCXX_$glibcxx.
  bin/trainyard --version                      what it runs against
  bin/trainyard run src/experiments/...yaml    train
  bin/test-gpu                                 the GPU suite and its summary
  bin/trainyard-tests --gtest_filter='Cli.*'   any part of the test suite (writes under build/tests/tmp)
docs: src/docs/building.md ("A package for machines without network").
README

mkdir -p "$out"
tar -czf "$out/$name.tar.gz" -C "$work" "$name"
echo "package: $out/$name.tar.gz ($(du -h "$out/$name.tar.gz" | cut -f1); $(ls "$pkg/lib" | wc -l) libraries carried, $nvjpeg_note;" \
     "needs torch $torch_version with CUDA ${torch_cuda%%.*}.x, glibc >= $glibc, GLIBCXX_$glibcxx)"
