#!/usr/bin/env bash
# Installs trainyard from BUILD_DIR into a prefix, builds the out-of-tree
# plugin project against that prefix, drops the library into a new folder,
# and checks that the installed host lists it and trains with it: its
# network, its meter's structured result, its callback reading meters. Then
# builds the installed example plugins (share/trainyard/examples) with no
# build type, and trains with them too.
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
grep -q "meters: .*margin" <<< "$listing" || { echo "FAIL: meter missing: $listing"; exit 1; }
grep -q "callbacks: .*test_watch" <<< "$listing" || { echo "FAIL: callback missing: $listing"; exit 1; }
grep -q "$prefix/lib/trainyard/plugins/libmlp.so" <<< "$listing" || { echo "FAIL: installed built-ins missing"; exit 1; }
"$host" describe scaled_linear --plugin-dir "$work/dropin" | grep -q "multiplies the logits" || { echo "FAIL: describe"; exit 1; }
"$host" describe scaled_linear --plugin-dir "$work/dropin" | grep -A1 "^  bias_file$" | grep -q "type: path" \
  || { echo "FAIL: describe does not show bias_file as a path"; exit 1; }

cat > "$work/exp.yaml" <<YAML
name: outside
plugin_dirs: [dropin]
dataset:
  train: {plugin: synthetic, size: 256, num_classes: 4, shape: [1, 4, 4]}
  test: {plugin: synthetic, size: 64, num_classes: 4, shape: [1, 4, 4], seed: 2}
network: {plugin: scaled_linear, scale: 2.0, bias_file: biases.txt}
loss: {plugin: cross_entropy}
optimizer: {plugin: sgd, lr: 0.1}
meters: [{plugin: topk_accuracy}, {plugin: margin, phases: [test]}]
callbacks: [{plugin: test_watch}]
loop: {epochs: 2, batch_per_device: 32}
extra: {scaled_linear: {boost: 1.5}}
YAML
echo "0.5 -0.5 0.25 0" > "$work/biases.txt"
# From another working directory: bias_file is a path option, so the host
# resolves it against the experiment file's folder before the plugin opens it.
(cd / && "$host" run "$work/exp.yaml" --output-dir "$work/runs" 2>"$work/stderr") || { cat "$work/stderr"; exit 1; }
grep -q "bias_file: $work/biases.txt" "$work/runs/outside/config.yaml" || { echo "FAIL: bias_file not resolved"; exit 1; }
grep -q '"test_accuracy_top1"' "$work/runs/outside/summary.json" || { echo "FAIL: no summary"; exit 1; }
grep -q 'scaled_linear' "$work/runs/outside/config.yaml" || { echo "FAIL: config"; exit 1; }
head -1 "$work/runs/outside/meters/margin_per_class-e2.csv" | grep -qx "class,samples,mean_margin" \
  || { echo "FAIL: no structured meter result"; ls -R "$work/runs/outside"; exit 1; }
[ "$(wc -l < "$work/runs/outside/meters/margin_per_class-e2.csv")" -eq 5 ] || { echo "FAIL: margin table rows"; exit 1; }
grep -q "test_watch: epoch 2 test_margin fresh" "$work/stderr" || { echo "FAIL: callback did not read meters"; cat "$work/stderr"; exit 1; }

# The installed examples, built as their README says, without a build type:
# trainyard_add_plugin() still optimizes (-O2) and exports the entry point alone.
examples="$prefix/share/trainyard/examples"
for f in CMakeLists.txt small_network.cpp per_class_meter.cpp stop_on_fresh_meter.cpp; do
  [ -f "$examples/$f" ] || { echo "FAIL: $examples/$f not installed"; exit 1; }
done
[ -f "$prefix/share/doc/trainyard/writing-a-plugin.md" ] && [ -f "$prefix/share/doc/trainyard/sdk-changes.md" ] \
  || { echo "FAIL: docs not installed"; exit 1; }
cmake -S "$examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "${launcher[@]}" >/dev/null
cmake --build "$work/examples" -j 2 >/dev/null
grep -q -- "-O2" "$work/examples/compile_commands.json" || { echo "FAIL: examples not optimized without a build type"; exit 1; }
for lib in "$work"/examples/libexample_*.so "$work/build/libscaled_linear.so"; do
  [ "$(nm -D --defined-only "$lib" | awk '{ print $NF }')" = "trainyard_plugin_entry" ] || { echo "FAIL: $lib exports more"; exit 1; }
done
mkdir -p "$work/examples_dropin"
cp "$work"/examples/libexample_*.so "$work/examples_dropin/"
cat > "$work/examples.yaml" <<YAML
name: examples
plugin_dirs: [examples_dropin]
dataset:
  train: {plugin: synthetic, size: 256, num_classes: 4, shape: [1, 4, 4]}
  test: {plugin: synthetic, size: 64, num_classes: 4, shape: [1, 4, 4], seed: 2}
network: {plugin: two_layer, hidden: 16}
loss: {plugin: cross_entropy}
optimizer: {plugin: sgd, lr: 0.1}
meters: [{plugin: topk_accuracy}, {plugin: per_class_accuracy, phases: [test]}]
callbacks: [{plugin: stop_on_fresh_meter, meter: test_accuracy_top1, target: 0.0}]
loop: {epochs: 3, batch_per_device: 32}
YAML
(cd "$work" && "$host" run examples.yaml --output-dir "$work/runs" 2>"$work/examples_stderr") || { cat "$work/examples_stderr"; exit 1; }
head -1 "$work/runs/examples/meters/per_class_accuracy-e1.csv" | grep -qx "class,samples,accuracy" \
  || { echo "FAIL: example meter wrote no table"; exit 1; }
grep -q '"epochs_completed": 1' "$work/runs/examples/summary.json" \
  || { echo "FAIL: example callback did not stop the run on a fresh value"; cat "$work/runs/examples/summary.json"; exit 1; }
echo "out-of-tree plugin: built, listed, described and trained (structured result, meter readings); examples built and trained"
