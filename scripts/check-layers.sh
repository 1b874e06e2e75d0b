#!/usr/bin/env bash
# The host's layers, checked from a configured build (ctest runs it as
# layers.*): an #include across a layer does not compile, no source file
# includes across one, yaml-cpp stays inside host/config/, and the loop does
# not include what its slots keep apart from it (the CUDA graph step).
# Usage: scripts/check-layers.sh BUILD_DIR [SOURCE_DIR] (default: this tree;
# tests/scripts/check_layers_test.sh plants a forbidden include in a copy).
set -euo pipefail
build="${1:?usage: check-layers.sh BUILD_DIR [SOURCE_DIR]}"
src="${2:-$(cd "$(dirname "$0")/.." && pwd)}"
views="$build/host/layers"
[ -d "$views" ] || { echo "error: check-layers: no $views; expected a configured build" >&2; exit 2; }
cxx="${CXX:-c++}"
failures=0

# A layer's include view holds its own folder and those below it, nothing else:
# including a header of a higher layer stops at the preprocessor. The header
# must exist: a check of a file that is gone passes without checking anything.
refused() {  # LAYER HEADER
  local out
  if [ ! -f "$src/host/$2" ]; then
    echo "FAIL: the check 'refused $1 $2' names host/$2, which does not exist"; failures=$((failures + 1)); return
  fi
  if out="$(echo "#include \"$2\"" | "$cxx" -E -x c++ -I "$views/$1" - 2>&1 >/dev/null)"; then
    echo "FAIL: $1 can include $2"; failures=$((failures + 1))
  elif ! grep -q "$2: No such file" <<<"$out"; then
    echo "FAIL: $1 including $2 failed for another reason: $out"; failures=$((failures + 1))
  fi
}
refused util config/experiment.h
refused formats config/experiment.h
refused plugins config/experiment.h
refused config train/epoch_loop.h
refused data distributed/communicator.h
refused distributed train/epoch_loop.h
refused report train/epoch_loop.h
refused train run/runner.h
refused distributed config/experiment.h
refused cli train/epoch_loop.h
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

# Every source file's own includes: a host folder it names must be in its
# layer's view (the build refuses it too, but only for files it compiles,
# and says less).
while IFS= read -r -d '' file; do
  layer="${file#"$src/host/"}"; layer="${layer%%/*}"
  [ -d "$views/$layer" ] || continue  # host/main.cpp, pch.h: above every layer
  while IFS= read -r included; do
    folder="${included%%/*}"
    [ -d "$src/host/$folder" ] || continue  # the SDK's, LibTorch's, the system's
    if [ ! -e "$views/$layer/$folder" ]; then
      echo "FAIL: ${file#"$src/"} includes $included: $layer/ may not use $folder/"; failures=$((failures + 1))
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\/[^"]*\)".*/\1/p' "$file")
done < <(find "$src/host" -mindepth 2 \( -name '*.h' -o -name '*.cpp' \) -print0)

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

# The loop knows the step replacements, the update's check reads and the
# checkpoint writer only through its slots (docs/architecture.md, "Where new
# things go"): none of the loop's files includes their headers, directly or
# through another host header.
apart="$(python3 - "$src/host" <<'PY'
import os, re, sys
root = sys.argv[1]
loop = ["train/epoch_loop.h", "train/epoch_loop.cpp", "train/epoch_loop_state.cpp"]
kept_out = {"train/cuda_graph.h", "train/captured_train_step.h", "util/background_worker.h"}
for start in loop:
    if not os.path.isfile(os.path.join(root, start)):
        print("the loop's file host/" + start + " does not exist: the check names files that do")
        continue
    seen, todo, parent = {start}, [start], {}
    while todo:
        f = todo.pop()
        with open(os.path.join(root, f), encoding="utf-8") as text:
            for m in re.finditer(r'^\s*#\s*include\s*"([^"]+)"', text.read(), re.M):
                inc = m.group(1)
                if inc in kept_out:
                    chain, at = [inc, f], f
                    while at in parent:
                        at = parent[at]
                        chain.append(at)
                    print("host/" + start + " includes " + inc + " (" + " <- ".join(chain) + ")")
                elif inc not in seen and os.path.isfile(os.path.join(root, inc)):
                    seen.add(inc)
                    parent[inc] = f
                    todo.append(inc)
PY
)"
if [ -n "$apart" ]; then
  echo "FAIL: the loop includes what its slots keep apart from it:"; echo "$apart"; failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then echo "check-layers: $failures failure(s)"; exit 1; fi
echo "check-layers: ok"
