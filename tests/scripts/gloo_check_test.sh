#!/usr/bin/env bash
# scripts/check-gloo-headers.py, which install-deps.sh runs on every install:
# exit 0 when the headers match the library, 1 with MISMATCH lines when they
# differ (another Gloo: install-deps tries the next Debian suite), 2 with one
# `error:` line when nothing can be checked; never a Python traceback.
#   gloo_check_test.sh SOURCE_DIR PYTHON GLOO_INCLUDE_DIR TMP_DIR
set -euo pipefail
src="$1" python="$2" gloo="$3" tmp="$4"
rm -rf "$tmp" && mkdir -p "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
check="$src/scripts/check-gloo-headers.py"
lib="$("$python" -c 'import importlib.util as u; print(u.find_spec("torch").submodule_search_locations[0])')/lib/libtorch_cpu.so"

# run EXPECTED_EXIT ARGS...: the exit code, stderr in $err, stdout in $out; never a traceback.
run() {
  local want="$1"; shift
  local rc=0
  "$@" > "$tmp/out" 2> "$tmp/err" || rc=$?
  out="$(cat "$tmp/out")" err="$(cat "$tmp/err")"
  ! grep -q 'Traceback' "$tmp/out" "$tmp/err" || fail "$*: a traceback: $err"
  [ "$rc" -eq "$want" ] || fail "$*: exit $rc, expected $want: $out $err"
}
one_error() {  # the whole of stderr is one error line matching $1
  [ "$(wc -l <<< "$err")" -eq 1 ] && grep -qE "^error: check-gloo-headers: $1" <<< "$err" ||
    fail "expected one error line matching '$1', got: $err"
}

# The install's headers against the build's torch: they match.
run 0 python3 "$check" "$gloo" "$lib"
grep -qx '0 mismatches' <<< "$out" || fail "matching headers: $out"

# Another Gloo: a virtual function missing from a header, and a header missing.
cp -r "$gloo" "$tmp/other"
sed -i '0,/virtual[^;]*;/s///' "$tmp/other/gloo/transport/pair.h"
rm "$tmp/other/gloo/common/store.h"
run 1 python3 "$check" "$tmp/other" "$lib"
grep -q '^MISMATCH gloo::transport::Pair' <<< "$out" || fail "a changed vtable is not a mismatch: $out"
grep -q '^MISMATCH gloo/common/store.h: no such header' <<< "$out" || fail "a missing header is not a mismatch: $out"
[ -z "$err" ] || fail "mismatches print no error line: $err"

# Nothing can be checked: one error line, exit 2.
run 2 python3 "$check"
one_error 'expected 2 arguments'
run 2 python3 "$check" "$tmp/nowhere" "$lib"
one_error "'$tmp/nowhere' has no gloo/rendezvous/store.h"
run 2 python3 "$check" "$gloo" /lib/libtorch_cpu.so   # what a first install passed before the environment existed
one_error "no readable library at '/lib/libtorch_cpu.so'"
echo "not a library" > "$tmp/fake.so"
run 2 python3 "$check" "$gloo" "$tmp/fake.so"
one_error "nm -D -S --defined-only $tmp/fake.so failed with exit 1"
mkdir -p "$tmp/bin" && ln -sf "$(python3 -c 'import sys; print(sys.executable)')" "$tmp/bin/python3"
run 2 env PATH="$tmp/bin" python3 "$check" "$gloo" "$lib"
one_error 'no nm on PATH; expected binutils'
# A header this script cannot parse (an unterminated class body).
cp -r "$gloo" "$tmp/cut"
printf 'namespace gloo { namespace transport {\nclass Pair {\n public:\n  virtual ~Pair(\n' > "$tmp/cut/gloo/transport/pair.h"
run 2 python3 "$check" "$tmp/cut" "$lib"
one_error '[A-Za-z]+Error at check-gloo-headers.py:[0-9]+ .* while comparing the headers in'
echo "ok"
