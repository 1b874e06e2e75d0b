#!/usr/bin/env bash
# Builds trainyard against another torch and tests that build, then packs it
# and runs the package, unpacked elsewhere, against a second, separately
# installed environment of that torch:
#   bash scripts/check-torch.sh [VERSION]      (default 2.11.0, the GPU machines' torch)
# 1. install-deps and build into build-torch-VERSION (torch from PyPI in its own
#    environment under TRAINYARD_CACHE; the readers pinned for that torch);
# 2. the test suite with that build (CHECK_TESTS: a ctest -R regex, default all
#    but Slurm.*, which tests the cluster, not torch);
# 3. scripts/package.sh, unpacked into a scratch folder; a second environment
#    with only torch VERSION and numpy; the package there: --version, a CPU
#    training of the Fashion-MNIST experiment, CHECK_PACKAGE_TESTS of the suite
#    (gtest filter), and the default torch's environment refused in one line.
# Cold: about 3 GB of wheels and a full build (556 s here with ccache partly warm; longer cold);
# docs/building.md has the last run's figures. Not part of CI (60 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-2.11.0}"
export TRAINYARD_TORCH_VERSION="$version" TRAINYARD_BUILD_DIR="build-torch-$version"
unset TRAINYARD_TORCH_PYTHON TRAINYARD_TORCH_DIR TRAINYARD_VENV TRAINYARD_GLOO_INCLUDE TRAINYARD_PYTHON
started=$(date +%s)
say() { echo "check-torch [$(( $(date +%s) - started )) s]: $*"; }

say "1. build against torch $version in $TRAINYARD_BUILD_DIR"
bash scripts/install-deps.sh
bash scripts/build.sh
say "no LD_PRELOAD: $(env | grep -c '^LD_PRELOAD=' || true) set; first NEEDED of bin/trainyard:" \
    "$(readelf -d "$TRAINYARD_BUILD_DIR/bin/trainyard" | awk '/NEEDED/ && !found { print $NF; found = 1 }')"

say "2. the suite with that build (${CHECK_TESTS:-all but Slurm.*})"
(cd "$TRAINYARD_BUILD_DIR" && if [ -n "${CHECK_TESTS:-}" ]; then
   ctest --output-on-failure -j "${TRAINYARD_TEST_JOBS:-2}" -R "$CHECK_TESTS"
 else
   ctest --output-on-failure -j "${TRAINYARD_TEST_JOBS:-2}" -E '^Slurm\.'
 fi)

say "3. the package, unpacked elsewhere, against a second environment of torch $version"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/trainyard-check-torch.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
bash scripts/package.sh "$scratch/dist"
tar -xzf "$scratch"/dist/*.tar.gz -C "$scratch"
pkg="$(ls -d "$scratch"/trainyard-*/)"; pkg="${pkg%/}"
other="${CHECK_OTHER_ENV:-$scratch/other-env}"
if [ ! -x "$other/bin/python" ]; then
  python3 -m venv "$other"
  "$other/bin/pip" install -q "torch==$version" numpy
fi
export TRAINYARD_TORCH_PYTHON="$other/bin/python"
"$pkg/bin/trainyard" --version
run="$scratch/runs"
"$pkg/bin/trainyard" run "$pkg/src/experiments/fashion_mnist_mlp.yaml" --output-dir "$run" \
  --set loop.epochs=1 --set distributed.num_gpus=0
grep -q '"phase": "test"' "$run"/*/metrics.jsonl || { echo "error: check-torch: the packaged run wrote no test metrics" >&2; exit 1; }
"$pkg/bin/trainyard-tests" --gtest_filter="${CHECK_PACKAGE_TESTS:-Cli.*:Resume.*:Checkpoints.*:PluginLoader.*:ImageDecode.*:LinkOrder.*:TorchScript.*:Distributed.TwoRanksThroughTheLauncher*}"
default_python="${TRAINYARD_CACHE:-$HOME/.cache/trainyard}/torch-2.15.0/bin/python"
if [ "$version" != 2.15.0 ] && [ -x "$default_python" ]; then
  set +e
  refused="$(TRAINYARD_TORCH_PYTHON="$default_python" "$pkg/bin/trainyard" --version 2>&1)"; rc=$?
  set -e
  echo "$refused"
  [ "$rc" -eq 2 ] && grep -q "^error: .*built against torch $version" <<< "$refused" ||
    { echo "error: check-torch: the package ran against torch 2.15.0 (exit $rc); expected one error line, exit 2" >&2; exit 1; }
fi
say "done: torch $version built, tested, packed, and run from the package against $other"
