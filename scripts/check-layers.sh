#!/usr/bin/env bash
# The host's layers, checked from a configured build (ctest runs it as
# layers.*): an #include across a layer does not compile, and yaml-cpp stays
# inside host/config/. Usage: scripts/check-layers.sh BUILD_DIR
set -euo pipefail
build="${1:?usage: check-layers.sh BUILD_DIR}"
src="$(cd "$(dirname "$0")/.." && pwd)"
views="$build/host/layers"
[ -d "$views" ] || { echo "error: check-layers: no $views; expected a configured build" >&2; exit 2; }
cxx="${CXX:-c++}"
failures=0

# A layer's include view holds its own folder and those below it, nothing else:
# including a header of a higher layer stops at the preprocessor.
refused() {  # LAYER HEADER
  local out
  if out="$(echo "#include \"$2\"" | "$cxx" -E -x c++ -I "$views/$1" - 2>&1 >/dev/null)"; then
    echo "FAIL: $1 can include $2"; failures=$((failures + 1))
  elif ! grep -q "$2: No such file" <<<"$out"; then
    echo "FAIL: $1 including $2 failed for another reason: $out"; failures=$((failures + 1))
  fi
}
refused util config/experiment.h
refused formats config/experiment.h
refused plugins config/experiment.h
refused config train/trainer.h
refused data distributed/communicator.h
refused distributed train/trainer.h
refused report train/trainer.h
refused train run/runner.h
refused distributed config/experiment.h
refused cli train/trainer.h
refused cli distributed/world.h
refused run cli/commands.h
refused run sweep/sweep_run.h
refused scaffold run/runner.h

# ... and sees what it may use.
visible() {  # LAYER FOLDER
  [ -e "$views/$1/$2" ] || { echo "FAIL: $1 cannot see $2"; failures=$((failures + 1)); }
}
visible train config
visible train data
visible run train
visible cli run
visible cli config

# yaml-cpp is config/'s private business.
if grep -rlE '#include <yaml-cpp|YAML::' "$src/host" --include=*.cpp --include=*.h | grep -v "^$src/host/config/"; then
  echo "FAIL: yaml-cpp used outside host/config/ (files above)"; failures=$((failures + 1))
fi

# Inside a layer, no back-arrow: a unit (X.h with X.cpp) never includes a
# unit of its folder that includes it back, directly or around a cycle (the
# loop's hooks see it through train/hooks.h's LoopState, never its header).
cycles="$(python3 - "$src/host" <<'PY'
import os, re, sys
root = sys.argv[1]
for folder in sorted(os.listdir(root)):
    d = os.path.join(root, folder)
    if not os.path.isdir(d):
        continue
    edges = {}
    for f in os.listdir(d):
        stem, ext = os.path.splitext(f)
        if ext not in (".h", ".cpp"):
            continue
        with open(os.path.join(d, f), encoding="utf-8") as text:
            for line in text:
                m = re.match(r'#include "' + re.escape(folder) + r'/([^"/]+)\.h"', line)
                if m and m.group(1) != stem:
                    edges.setdefault(stem, set()).add(m.group(1))
    # Tarjan's strongly connected components: any of more than one unit is a cycle.
    index, low, stack, on, counter = {}, {}, [], set(), [0]
    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                print(folder + "/: " + " -> ".join(sorted(component)))
    for v in sorted(edges):
        if v not in index:
            visit(v)
PY
)"
if [ -n "$cycles" ]; then
  echo "FAIL: include cycles inside a layer (units that include each other):"; echo "$cycles"; failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then echo "check-layers: $failures failure(s)"; exit 1; fi
echo "check-layers: ok"
