#!/usr/bin/env bash
# `trainyard new-plugin` for every kind: generates the seven projects with the
# installed host, builds them against the installed SDK (one CMake build that
# adds each project as it is), drops the libraries into a folder, and trains
# an experiment made only of the generated components.
set -euo pipefail
build_dir=$1 work=$2
rm -rf "$work"
mkdir -p "$work/src" "$work/dropin"
prefix="$work/prefix"
cmake --install "$build_dir" --prefix "$prefix" >/dev/null
host="$prefix/bin/trainyard"

kinds=(network dataset loss optimizer meter callback additional_override)
for kind in "${kinds[@]}"; do
  "$host" new-plugin "gen_$kind" --kind "$kind" --output "$work/src/gen_$kind" >/dev/null
done
# Refuses to overwrite.
if "$host" new-plugin gen_network --kind network --output "$work/src/gen_network" 2>/dev/null; then
  echo "FAIL: new-plugin overwrote a project"; exit 1
fi
{
  echo "cmake_minimum_required(VERSION 3.18)"
  echo "project(generated LANGUAGES CXX)"
  for kind in "${kinds[@]}"; do echo "add_subdirectory(gen_$kind)"; done
} > "$work/src/CMakeLists.txt"
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# C++ plugins need no CUDA toolkit: configured and built with no nvcc on the
# PATH and CUDACXX, CUDA_HOME, CUDA_PATH pointing nowhere (docs/writing-a-plugin.md).
no_nvcc_path=""
IFS=: read -ra path_dirs <<< "$PATH"
for d in "${path_dirs[@]}"; do [ -x "$d/nvcc" ] || no_nvcc_path+="${no_nvcc_path:+:}$d"; done
no_cuda=(env PATH="$no_nvcc_path" CUDACXX=/nonexistent/bin/nvcc CUDA_HOME=/nonexistent CUDA_PATH=/nonexistent
         CUDA_ROOT=/nonexistent CUDAToolkit_ROOT=/nonexistent)
if "${no_cuda[@]}" sh -c 'command -v nvcc' >/dev/null; then echo "FAIL: nvcc still on the PATH"; exit 1; fi
"${no_cuda[@]}" cmake -S "$work/src" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  "${launcher[@]}" > "$work/configure.log" 2>&1 || { echo "FAIL: configure without a CUDA toolkit"; tail -30 "$work/configure.log"; exit 1; }
if grep -q "^CMAKE_CUDA_COMPILER:" "$work/build/CMakeCache.txt"; then
  echo "FAIL: the C++ plugin project enabled CUDA"; grep "^CMAKE_CUDA" "$work/build/CMakeCache.txt"; exit 1
fi
"${no_cuda[@]}" cmake --build "$work/build" -j 2 > "$work/build.log" 2>&1 || { echo "FAIL: build"; tail -30 "$work/build.log"; exit 1; }
# The templates follow the guide: no deprecated 0.x option calls.
if grep -q "Wdeprecated-declarations" "$work/build.log"; then echo "FAIL: deprecation warnings"; grep -B2 -A2 deprecated "$work/build.log"; exit 1; fi
for kind in "${kinds[@]}"; do cp "$work/build/gen_$kind/libgen_$kind.so" "$work/dropin/"; done

listing=$("$host" plugins --plugin-dir "$work/dropin")
for kind in "${kinds[@]}"; do
  grep -q "gen_$kind 0.1.0" <<< "$listing" || { echo "FAIL: gen_$kind not listed: $listing"; exit 1; }
done

cat > "$work/exp.yaml" <<YAML
name: generated
plugin_dirs: [dropin]
dataset:
  train: {plugin: gen_dataset, size: 600}
  test: {plugin: gen_dataset, size: 150, seed: 1}
network: {plugin: gen_network}
loss: {plugin: gen_loss}
optimizer: {plugin: gen_optimizer, lr: 0.05}
meters: [{plugin: topk_accuracy}, {plugin: gen_meter, confidence: 0.5}]
callbacks: [{plugin: gen_callback, every_iters: 10}]
overrides: [{plugin: gen_additional_override, every: 1}]
loop: {epochs: 3, batch_per_device: 30}
distributed: {threads_per_process: 1}
YAML
(cd "$work" && "$host" run exp.yaml --output-dir "$work/runs" 2>"$work/stderr")
grep -q "gen_callback: iteration 10 loss" "$work/stderr" || { echo "FAIL: the callback did not log"; cat "$work/stderr"; exit 1; }
grep -q '"test_confident"' "$work/runs/generated/summary.json" || { echo "FAIL: no meter value"; exit 1; }
grep -q "gen_callback: epoch 3 test_confident .* (fresh)" "$work/stderr" || { echo "FAIL: the callback did not read the meters"; cat "$work/stderr"; exit 1; }
head -1 "$work/runs/generated/meters/gen_meter-histogram-e3.csv" | grep -qx "from,to,samples" \
  || { echo "FAIL: the meter's structured result is missing"; ls -R "$work/runs/generated"; exit 1; }
accuracy=$(sed -n 's/.*"test_accuracy_top1": \([0-9.]*\).*/\1/p' "$work/runs/generated/summary.json")
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.8) }' || { echo "FAIL: test accuracy $accuracy on separable blobs"; exit 1; }
echo "new-plugin: 7 kinds generated, built against the installed SDK, loaded and trained together (test top-1 $accuracy)"
