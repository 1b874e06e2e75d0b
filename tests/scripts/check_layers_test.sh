#!/usr/bin/env bash
# scripts/check-layers.sh checks something: on a copy of host/, it passes as
# the tree is, fails on a planted include across a layer (config -> train)
# naming the file, fails when one of its checks names a header that no
# longer exists (a check that cannot fail guards nothing), and fails when the
# loop reaches train/cuda_graph.h through a header it includes.
#   check_layers_test.sh BUILD_DIR SOURCE_DIR TMP_DIR
set -euo pipefail
build="$1" src="$2" tmp="$3"
fail() { echo "FAIL: $*"; exit 1; }
check() { CXX="${CXX:-c++}" bash "$src/scripts/check-layers.sh" "$build" "$tmp/tree" > "$tmp/out.txt" 2>&1; }
fresh() { rm -rf "$tmp/tree" && mkdir -p "$tmp/tree" && cp -r "$src/host" "$tmp/tree/host"; }

fresh
check || fail "the unchanged tree: $(cat "$tmp/out.txt")"

fresh
sed -i '0,/^#include/s//#include "train\/epoch_loop.h"\n#include/' "$tmp/tree/host/config/experiment.cpp"
rc=0; check || rc=$?
[ "$rc" -eq 1 ] || fail "a planted config -> train include: exit $rc, expected 1: $(cat "$tmp/out.txt")"
grep -q '^FAIL: host/config/experiment.cpp includes train/epoch_loop.h: config/ may not use train/$' "$tmp/out.txt" ||
  fail "the planted include is not named: $(cat "$tmp/out.txt")"

fresh
rm "$tmp/tree/host/train/epoch_loop.h"
rc=0; check || rc=$?
[ "$rc" -eq 1 ] || fail "a check of a missing header: exit $rc, expected 1: $(cat "$tmp/out.txt")"
grep -q "names host/train/epoch_loop.h, which does not exist" "$tmp/out.txt" ||
  fail "the check of a missing header passes silently: $(cat "$tmp/out.txt")"
fresh
sed -i 's|^#include "train/precision.h"|#include "train/precision.h"\n#include "train/cuda_graph.h"|' "$tmp/tree/host/train/update.h"
rc=0; check || rc=$?
[ "$rc" -eq 1 ] || fail "the loop reaching cuda_graph.h through update.h: exit $rc, expected 1: $(cat "$tmp/out.txt")"
grep -q "host/train/epoch_loop.h includes train/cuda_graph.h (train/cuda_graph.h <- train/update.h <- " "$tmp/out.txt" ||
  fail "the loop's planted include is not named: $(cat "$tmp/out.txt")"
rm -rf "$tmp"
echo "ok"
