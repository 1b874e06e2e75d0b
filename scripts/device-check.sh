#!/usr/bin/env bash
# The one call a lent GPU gets (docs/building.md, "The device call"): from an
# unpacked package, the GPU suite and then the benchmark, each under a time
# budget, so that the call stays under 8 of the device's 15 minutes and 5 are
# left for a rerun. Writes into OUT (default ./device-check):
#   test-gpu.txt   bin/test-gpu's output; its summary goes into docs/distributed.md's table of GPU runs
#   bench-gpu.txt  scripts/bench-gpu.sh's output; its tables go into docs/performance.md, "On a GPU"
#   timing.txt     how long each part took, and the machine
# Run from the package's folder, with the machine's torch named:
#   TRAINYARD_TORCH_PYTHON=/opt/torch/.venv/bin/python bash src/scripts/device-check.sh "$OUT"
# Budgets (seconds): TESTS_S (250) for the suite (each test at most
# TEST_TIMEOUT, 90; no test starts after the budget), BENCH_S (180) for the
# benchmark, small: PHOTOS 2000, EPOCHS 2, ResNet-50 and -18, 15 decode threads
# and 4, the graph and decode: gpu rows (each knob can be set). On a machine
# without a GPU both parts say so and the call is a dry run of the script
# itself; BENCH_GPU_CPU=1 then runs the benchmark's small CPU path.
set -uo pipefail
pkg="$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)"
out="${1:-device-check}"
mkdir -p "$out" || { echo "error: device-check: cannot make the output folder '$out'" >&2; exit 2; }
out="$(cd "$out" && pwd)"
for needed in bin/test-gpu bin/trainyard-env src/scripts/bench-gpu.sh; do
  [ -e "$pkg/$needed" ] || { echo "error: device-check: $pkg has no $needed; expected an unpacked package (scripts/package.sh)" >&2; exit 2; }
done
tests_s="${TESTS_S:-250}" bench_s="${BENCH_S:-180}"
case "$tests_s$bench_s" in *[!0-9]*)
  echo "error: device-check: TESTS_S='$tests_s', BENCH_S='$bench_s'; expected whole seconds" >&2; exit 2 ;;
esac

{
  date -u +"started %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no GPU (nvidia-smi lists none)"
  echo "CPUs: $(nproc --all); package: $(basename "$pkg")"
} > "$out/timing.txt"

start=$(date +%s)
TEST_TIMEOUT="${TEST_TIMEOUT:-90}" TEST_BUDGET="$tests_s" "$pkg/bin/test-gpu" > "$out/test-gpu.txt" 2>&1
tests_rc=$?
echo "test-gpu: exit $tests_rc in $(( $(date +%s) - start )) s (budget $tests_s s)" >> "$out/timing.txt"

start=$(date +%s)
# bench-gpu.sh stops on its own budget too (its photo set, then its rows): a
# benchmark cut short keeps the rows it printed.
PHOTOS="${PHOTOS:-2000}" EPOCHS="${EPOCHS:-2}" BOUND_STEPS="${BOUND_STEPS:-20}" \
  timeout --kill-after=10 "$bench_s" "$pkg/bin/trainyard-env" bash "$pkg/src/scripts/bench-gpu.sh" > "$out/bench-gpu.txt" 2>&1
bench_rc=$?
case "$bench_rc" in
  124|137) note="cut at the budget" ;;
  *) note="exit $bench_rc" ;;
esac
echo "bench-gpu: $note in $(( $(date +%s) - start )) s (budget $bench_s s)" >> "$out/timing.txt"
cat "$out/timing.txt"
tail -n 40 "$out/test-gpu.txt"
tail -n 30 "$out/bench-gpu.txt"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
