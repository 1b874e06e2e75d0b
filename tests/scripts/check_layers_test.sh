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

# After a change to the fresh copy: check-layers exits 1 with a line matching PATTERN.
fails_naming() {  # WHAT PATTERN
  local rc=0
  check || rc=$?
  [ "$rc" -eq 1 ] || fail "$1: exit $rc, expected 1: $(cat "$tmp/out.txt")"
  grep -q -- "$2" "$tmp/out.txt" || fail "$1 is not named: $(cat "$tmp/out.txt")"
}

fresh
check || fail "the unchanged tree: $(cat "$tmp/out.txt")"

fresh
sed -i '0,/^#include/s//#include "train\/epoch_loop.h"\n#include/' "$tmp/tree/host/config/experiment.cpp"
fails_naming "a planted config -> train include" \
  '^FAIL: host/config/experiment.cpp includes train/epoch_loop.h: config/ may not use train/$'

fresh
rm "$tmp/tree/host/train/epoch_loop.h"
fails_naming "a check of a missing header" "names host/train/epoch_loop.h, which does not exist"

fresh
sed -i 's|^#include "train/precision.h"|#include "train/precision.h"\n#include "train/cuda_graph.h"|' "$tmp/tree/host/train/update.h"
fails_naming "the loop reaching cuda_graph.h through update.h" \
  "host/train/epoch_loop.h includes train/cuda_graph.h (train/cuda_graph.h <- train/update.h <- "
rm -rf "$tmp"
echo "ok"
