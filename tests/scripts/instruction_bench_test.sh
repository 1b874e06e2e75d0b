#!/usr/bin/env bash
# scripts/bench-overhead-instructions.sh in a short form (the narrow model,
# 10 iterations): its callgrind toggles still name the loop's epoch (a rename
# made them collect nothing for days, unnoticed), and the table comes out
# with instruction counts above zero and the iterations counted. No ratio is
# asserted: this checks the benchmark, not the speed.
#   instruction_bench_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1" src="$2"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$out"; exit 1; }
TRAINYARD_BUILD_DIR="$build" MODELS=narrow NARROW_SAMPLES=320 bash "$src/scripts/bench-overhead-instructions.sh" > "$out" 2>&1 ||
  fail "exit code $?"
grep -qF "### narrow: MLP 784-16-16-10, batch 32, 320 samples" "$out" || fail "no table for the narrow model"
grep -qE '^\| iterations \| 10 \| 10 \| \|$' "$out" || fail "10 iterations on both sides"
grep -qE '^\| instructions in the epoch \| [1-9][0-9]* \| [1-9][0-9]* \| [0-9.]+ \|$' "$out" ||
  fail "instruction counts above zero on both sides, and their ratio"
echo "ok"
