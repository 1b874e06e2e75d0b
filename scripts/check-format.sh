#!/usr/bin/env bash
# The C++ sources follow .clang-format (Google's style at 120 columns): lists
# the files clang-format would change and exits 1, or says they all follow it.
#   bash scripts/check-format.sh          check (a ctest runs it)
#   bash scripts/check-format.sh --fix    reformat them in place
# The old SDK headers under tests/fixtures/sdk-1.*/ are kept as they shipped.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "error: check-format: no clang-format; expected Debian's clang-format (scripts/install-deps.sh)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.hpp' 2>/dev/null | grep -v '^tests/fixtures/sdk-1\.' ||
                     find host sdk plugins tests -name '*.cpp' -o -name '*.h' | grep -v '^tests/fixtures/sdk-1\.')
if [ "${1:-}" = --fix ]; then clang-format --style=file -i "${files[@]}"; exit 0; fi
unformatted=()
for f in "${files[@]}"; do
  clang-format --style=file --dry-run "$f" 2>&1 | grep -q 'warning:' && unformatted+=("$f")
done
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "check-format: ${#unformatted[@]} of ${#files[@]} files differ from .clang-format ($(clang-format --version | head -n1 || true)):"
  printf '  %s\n' "${unformatted[@]}"
  echo "run: bash scripts/check-format.sh --fix"
  exit 1
fi
echo "check-format: all ${#files[@]} C++ files follow .clang-format"
