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

if [ "$failures" -ne 0 ]; then echo "check-layers: $failures failure(s)"; exit 1; fi
echo "check-layers: ok"
