#!/usr/bin/env bash
# Builds everything with AddressSanitizer and UndefinedBehaviorSanitizer
# (GCC, into build-asan/) and runs the test suite on it. Any error report
# fails the run (-fno-sanitize-recover=all; ASan aborts on its first error).
# LibTorch and the system libraries are not instrumented; leak checking is
# off, because LibTorch's and the plugins' process-lifetime caches (plugins
# are never unloaded) would all be reported as leaks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
source scripts/torch-env.sh
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
cmake -S . -B build-asan "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-g1 -DTRAINYARD_SANITIZE=address,undefined \
  "${trainyard_cmake_args[@]}"
cmake --build build-asan -j "${TRAINYARD_JOBS:-2}"
# handle_segv=0: a crash in plugin code goes to trainyard's own reporter (tested).
# allocator_may_return_null=1: an allocation too large for the machine fails as it does without
# ASan (the host reports it as bad input; tested) instead of aborting the process.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:detect_odr_violation=0:handle_segv=0:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
cd build-asan
# The out-of-tree plugin tests build uninstrumented plugins against an installed
# copy; they test packaging, not memory safety, and are left out here.
ctest -j "${TRAINYARD_JOBS:-2}" --output-on-failure -E '^sdk\.' "$@"
