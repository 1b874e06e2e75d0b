#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer) into build-fuzz/ and runs each one for SECONDS
# (default 60), starting from the seed corpus in tests/fuzz/corpus/<target>.
# New interesting inputs go to build-fuzz/corpus/<target>, crashing inputs to
# build-fuzz/crashes/. Exits non-zero if any target found a crash.
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]    targets: experiment set record manifest shard
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(experiment set record manifest shard)
bash scripts/install-deps.sh
if ! command -v clang++ >/dev/null 2>&1 || ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "ok installed"; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev
fi
source scripts/torch-env.sh
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
cmake -S . -B build-fuzz "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-g1 -DCMAKE_CXX_COMPILER=clang++ \
  -DTRAINYARD_FUZZ=ON -DBUILD_TESTING=OFF "${trainyard_cmake_args[@]}" >/dev/null
cmake --build build-fuzz -j "${TRAINYARD_JOBS:-2}" $(printf -- '--target fuzz_%s ' "${targets[@]}")
export ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}"
status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" build-fuzz/crashes
  echo "== fuzz_$t for ${seconds}s"
  if ! "build-fuzz/bin/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
       -artifact_prefix="build-fuzz/crashes/$t-" -print_final_stats=1 \
       "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" > "build-fuzz/fuzz_$t.log" 2>&1; then
    echo "fuzz_$t: FOUND A CRASH (build-fuzz/crashes/, log build-fuzz/fuzz_$t.log)"; status=1
  fi
  grep -E "^stat::number_of_executed_runs|^stat::peak_rss_mb|cov: " "build-fuzz/fuzz_$t.log" | tail -3
done
exit $status
