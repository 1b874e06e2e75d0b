#!/usr/bin/env bash
# Installs trainyard from BUILD_DIR into a prefix, builds the out-of-tree
# plugin project against that prefix, drops the library into a new folder,
# and checks that the installed host lists it and trains with it.
set -euo pipefail
build_dir=$1 project=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build_dir" --prefix "$prefix" >/dev/null
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$project" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build "$work/build" >/dev/null
mkdir -p "$work/dropin"
cp "$work/build/libscaled_linear.so" "$work/dropin/"

host="$prefix/bin/trainyard"
api=$("$host" --version | sed -n 's/.*SDK API \([0-9.]*\),.*/\1/p')
listing=$("$host" plugins --plugin-dir "$work/dropin")
grep -q "scaled_linear 2.1.0 (API $api), fingerprint ok" <<< "$listing" || { echo "FAIL: not listed: $listing"; exit 1; }
grep -q "networks: scaled_linear" <<< "$listing" || { echo "FAIL: component missing: $listing"; exit 1; }
grep -q "$prefix/lib/trainyard/plugins/libmlp.so" <<< "$listing" || { echo "FAIL: installed built-ins missing"; exit 1; }
"$host" describe scaled_linear --plugin-dir "$work/dropin" | grep -q "multiplies the logits" || { echo "FAIL: describe"; exit 1; }

cat > "$work/exp.yaml" <<YAML
name: outside
plugin_dirs: [dropin]
dataset:
  train: {plugin: synthetic, size: 256, num_classes: 4, shape: [1, 4, 4]}
  test: {plugin: synthetic, size: 64, num_classes: 4, shape: [1, 4, 4], seed: 2}
network: {plugin: scaled_linear, scale: 2.0}
loss: {plugin: cross_entropy}
optimizer: {plugin: sgd, lr: 0.1}
meters: [{plugin: topk_accuracy}]
loop: {epochs: 2, batch_per_device: 32}
extra: {scaled_linear: {boost: 1.5}}
YAML
(cd "$work" && "$host" run exp.yaml --output-dir "$work/runs")
grep -q '"test_accuracy_top1"' "$work/runs/outside/summary.json" || { echo "FAIL: no summary"; exit 1; }
grep -q 'scaled_linear' "$work/runs/outside/config.yaml" || { echo "FAIL: config"; exit 1; }
echo "out-of-tree plugin: built, listed, described and trained"
