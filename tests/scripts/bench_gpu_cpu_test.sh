#!/usr/bin/env bash
# scripts/bench-gpu.sh's CPU path in a tiny configuration (20 photos at 32 px,
# batch 4, one epoch): every column of both tables is printed, with numbers
# where the CPU has them (kernel launches 0; the checkpoint's blocking time a
# number or n/a; CPU s/img above 0 for both), and the decode: gpu rows are
# said to need a GPU. No speed is asserted: this checks the script's logic.
#   bench_gpu_cpu_test.sh BUILD_DIR SOURCE_DIR PYTHON TMP_DIR
set -euo pipefail
build="$1" src="$2" python="$3" tmp="$4"
rm -rf "$tmp/work" && mkdir -p "$tmp/work"
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$tmp/out.txt"; exit 1; }
TRAINYARD_TEST_BUILD_DIR="$build" TRAINYARD_TEST_PYTHON="$python" TMPDIR="$tmp/work" \
  DEVICE=cpu PHOTOS=24 BATCH=4 CROP=32 EPOCHS=1 THREADS=1 PROFILE=1:3 BOUND_STEPS=2 PHOTO_SET="$tmp/photos" \
  bash "$src/scripts/bench-gpu.sh" > "$tmp/out.txt" 2>&1 || fail "exit code $?"
out="$tmp/out.txt"
grep -q '^CPU: .*ISA flags: ' "$out" || fail "no CPU model and ISA flags at the top"
grep -q '^device: CPU' "$out" || fail "the CPU path does not say it runs on the CPU"
grep -qE '^model +threads \| trainyard img/s \(wait\) +\| CPU s/img \| PyTorch img/s \(wait\) +\| CPU s/img \| +compute-bound \| ty/PyTorch +ty/bound' "$out" ||
  fail "the rates' header"
grep -qE '^model +threads \| host syncs/step ty +\| host syncs/step PT +\| launches/step ty +\| launches/step PT +\| ty/PT +\| epoch-end block s' "$out" ||
  fail "the waits' header"
num='[0-9]+(\.[0-9]+)?'
# ResNet-18, 1 thread: images/s (wait %) and CPU s/img for both, the bound, two ratios; all numbers.
grep -qE "^ResNet-18 +1 \| +$num \( *$num%\) +\| +$num \| +$num \( *$num%\) +\| +$num \| +$num \| $num +$num *\$" "$out" ||
  fail "the rates' row has a column without a number"
# CPU time was counted: trainyard's (bash's time) and PyTorch's (getrusage, workers included) above 0.
awk -F'|' '/^ResNet-18 +1 \|/ { exit !($3 + 0 > 0 && $5 + 0 > 0) }' "$out" ||
  fail "a CPU s/img of 0: the CPU time was not counted"
grep -q "no decode: gpu rows: they need a GPU" "$out" || fail "the CPU path does not say the decode: gpu rows need a GPU"
# Host syncs per step (numbers), kernel launches 0 on both sides, the ratio n/a (no launches), the blocking time.
grep -qE "^ResNet-18 +1 \| +$num \| +$num \| +0 \| +0 \| n/a +\| ($num|n/a)\$" "$out" ||
  fail "the waits' row: host syncs as numbers, kernel launches 0, the launch ratio n/a, the blocking time"
echo "ok"; cat "$out"
