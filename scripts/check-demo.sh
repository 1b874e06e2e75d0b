#!/usr/bin/env bash
# Did the README's demo (scripts/demo.sh) do what the README says? Reads the
# run's summary.json: both epochs trained and a test top-1 of at least
# MIN_TOP1 (default 0.85; the README states ~0.88, measured 0.876-0.880). CI
# runs it after the demo (.ci/run). One `error:` line and exit 2 otherwise.
#   check-demo.sh [RUN_DIR]   (default runs/fashion_mnist_mlp)
set -euo pipefail
cd "$(dirname "$0")/.."
run="${1:-runs/fashion_mnist_mlp}"
min="${MIN_TOP1:-0.85}"
summary="$run/summary.json"
[ -f "$summary" ] || { echo "error: check-demo: no $summary; expected the demo's run (bash scripts/demo.sh)" >&2; exit 2; }
python3 - "$summary" "$min" <<'EOF'
import json, sys
path, least = sys.argv[1], float(sys.argv[2])
try:
    with open(path) as f:
        s = json.load(f)
    epochs, top1 = s["epochs_completed"], s["metrics"]["test_accuracy_top1"]
except (OSError, ValueError, KeyError, TypeError) as e:
    print(f"error: check-demo: {path}: expected a summary with epochs_completed and metrics.test_accuracy_top1, "
          f"got {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(2)
if epochs != 2 or not top1 >= least:
    print(f"error: check-demo: {path}: {epochs} epochs, test top-1 {top1}; expected 2 epochs and a test top-1 of at "
          f"least {least} (the README says ~0.88)", file=sys.stderr)
    sys.exit(2)
print(f"check-demo: {epochs} epochs, test top-1 {top1:.4f} (at least {least})")
EOF
