#!/usr/bin/env bash
# Input pipeline throughput on Fashion-MNIST, in one invocation:
#  1. images/s reading the same pixels from memory (fashion_mnist dataset);
#  2. images/s from LMDB + PNG decode + augmentation (flip, translation,
#     normalization) with 1 and 2 decode threads (trainyard iterate);
#  3. the share of step time the LMDB convnet experiment waits for input
#     (its input_wait_share), over TRAIN_SAMPLES samples.
# Needs a build (scripts/build.sh). Converts the data to LMDB if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin/trainyard
[ -x "$bin" ] || { echo "error: build first: bash scripts/build.sh" >&2; exit 2; }
samples="${TRAIN_SAMPLES:-12800}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db=data/fashion_mnist_lmdb
[ -d "$db/train" ] && [ -d "$db/test" ] || bash scripts/convert-fashion-mnist.sh "$db" >/dev/null
lmdb_exp=experiments/fashion_mnist_lmdb_convnet.yaml
cores=$(nproc)
echo "$("$bin" --version | grep "^LibTorch"); cores: $cores"
source scripts/bench/cpu-header.sh && bench_cpu_header "$bin"
echo
rate() { sed -n 's/.* s, samples_per_sec \([0-9.e+]*\).*/\1/p'; }
memory=$("$bin" iterate experiments/fashion_mnist_mlp.yaml --set loop.shuffle=true | rate)
printf "| input | decode threads | images/s |\n|---|---|---|\n"
printf "| memory (fashion_mnist, index_select) | 0 | %.0f |\n" "$memory"
for threads in 1 2; do
  r=$("$bin" iterate "$lmdb_exp" --set loop.decode_threads=$threads | rate)
  printf "| LMDB + PNG decode + flip/translate/normalize | %d | %.0f |\n" "$threads" "$r"
done
echo
printf "| convnet from LMDB, %d samples | compute threads | decode threads | train samples/s | input wait share |\n|---|---|---|---|---|\n" "$samples"
for pair in 2:1 2:2 1:1; do
  compute=${pair%%:*} threads=${pair##*:}
  "$bin" run "$lmdb_exp" --output-dir "$work" --fresh --set loop.epochs=1 --set loop.train_samples_per_epoch="$samples" \
    --set loop.test_samples=1000 --set loop.decode_threads=$threads --set distributed.threads_per_process=$compute >/dev/null
  line=$(grep '"secs_per_train"' "$work/fashion_mnist_lmdb_convnet/metrics.jsonl" | tail -1)
  sps=$(echo "$line" | sed -n 's/.*"samples_per_sec": \([0-9.e+-]*\).*/\1/p')
  share=$(echo "$line" | sed -n 's/.*"input_wait_share": \([0-9.e+-]*\).*/\1/p')
  printf "| | %d | %d | %.0f | %.2f%% |\n" "$compute" "$threads" "$sps" "$(awk -v s="$share" 'BEGIN { print 100 * s }')"
done
echo
echo "Goal: input wait under 2% of step time."
