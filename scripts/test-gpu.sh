#!/usr/bin/env bash
# The GPU test suite (tests/gpu/gpu_test.cpp), for any machine with NVIDIA GPUs
# (Debian or Ubuntu based images):
#   1 GPU:  single-device training, auto precision from the compute capability,
#           bf16/fp16 autocast really on, fp16 loss scaling, the pinned
#           side-stream loader, a GPU checkpoint evaluated on the CPU, an fp16
#           resume that ends bit-identical;
#   2+ GPUs: NCCL data parallel equal to one GPU, sync batch norm over NCCL (also
#           in fp16/bf16 past float16's count), rank 0's buffers, a killed rank
#           named within the timeout, a bit-identical resume with nothing of
#           rank 1 on GPU 0, one visible GPU per rank.
# Without a GPU it says so and exits 0 (CI and development machines have none).
# Before building it checks what a user would otherwise learn from a crash:
# the driver (the cu132 wheel needs >= 580), each GPU's compute capability
# (the wheel has kernels for sm_75 to sm_120), /dev/shm (NCCL's intra-node
# transport). Every test runs alone under a time limit (TEST_TIMEOUT, default
# 600 s); TF32 is off (NVIDIA_TF32_OVERRIDE=0) so fp32 comparisons mean fp32.
# TEST_BUDGET (seconds, default none): no test starts after the suite has run
# that long; the rest are listed as not run (a lent GPU's minutes are few:
# scripts/device-check.sh). GPU_TESTS (a gtest filter) narrows the suite.
# With one GPU, the MultiGpu tests run with two ranks sharing it over Gloo
# (TRAINYARD_TEST_SHARED_GPU=1, a test setting: docs/distributed.md); those
# whose point is two physical GPUs skip, saying so.
# Ends with a summary to paste into an issue. Installs and builds as
# scripts/test.sh does, unless TRAINYARD_PREBUILT names a finished build: a
# package's bin/test-gpu (scripts/package.sh) sets it, with
# TRAINYARD_PREBUILT_CUDA (the CUDA of the torch it was built against).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "test-gpu: no GPU found (nvidia-smi is not installed); the GPU suite did not run"
  exit 0
fi
listed=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ "${listed:-0}" -eq 0 ]; then
  echo "test-gpu: no GPU found (nvidia-smi lists none); the GPU suite did not run"
  exit 0
fi
nvidia-smi -L

# --- What the torch needs from this machine --------------------------------------
if [ -n "${TRAINYARD_PREBUILT:-}" ]; then
  build="$TRAINYARD_PREBUILT"; cuda="${TRAINYARD_PREBUILT_CUDA:-none}"; python="${TRAINYARD_TEST_PYTHON:-}"
else
  source scripts/torch-env.sh
  build="$TRAINYARD_BUILD_DIR"; python="$TRAINYARD_PYTHON"
  cuda="$trainyard_torch_cuda"
fi
# CUDA 13 needs driver 580 or newer, CUDA 12 (with minor-version compatibility) 525.
case "${cuda%%.*}" in 13) min_driver=580 ;; 12) min_driver=525 ;; *) min_driver=0 ;; esac
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | sed -n '1s/ //gp')
if [ "${driver%%.*}" -lt "$min_driver" ] 2>/dev/null; then
  echo "error: test-gpu: NVIDIA driver $driver; expected >= $min_driver for torch built with CUDA $cuda;" \
       "install a newer driver, or use a torch built for an older CUDA (docs/building.md)" >&2
  exit 2
fi
# The compute capabilities torch has kernels for (sm_75 ... sm_120 for the cu13x wheels).
arches=""
[ -n "$python" ] && arches=$(env -u LD_LIBRARY_PATH "$python" -c \
  'import torch; print(" ".join(a[3:] for a in torch.cuda.get_arch_list() if a.startswith("sm_")))' 2>/dev/null || true)
arches=${arches:-"75 80 86 90 100 120"}
unsupported=$(nvidia-smi --query-gpu=index,name,compute_cap --format=csv,noheader |
  awk -F', ' -v arches="$arches" '{ split($3, c, "."); cap = c[1] * 10 + c[2]; n = split(arches, a, " "); ok = 0
    for (i = 1; i <= n; i++) if (a[i] + 0 <= cap && int(a[i] / 10) == c[1]) ok = 1
    if (!ok) print "GPU " $1 " (" $2 ", compute capability " $3 ")" }')
if [ -n "$unsupported" ]; then
  echo "error: test-gpu: $unsupported: this torch has kernels for compute capabilities $arches only;" \
       "expected a GPU it supports, or a torch built for this one" >&2
  exit 2
fi
shm_mb=$(df -Pm /dev/shm 2>/dev/null | awk 'NR == 2 { print $2 }')
if [ -n "$shm_mb" ] && [ "$shm_mb" -lt 1024 ]; then
  echo "test-gpu: warning: /dev/shm is ${shm_mb} MB; NCCL's shared-memory transport needs more between" \
       "processes of one machine (docker: --shm-size=8g, or --ipc=host); NCCL_SHM_DISABLE=1 for this run" >&2
  export NCCL_SHM_DISABLE=1
fi

if [ -z "${TRAINYARD_PREBUILT:-}" ]; then
  bash scripts/install-deps.sh
  bash scripts/build.sh
fi

# GPUs as LibTorch sees them (CUDA_VISIBLE_DEVICES, MIG instances), not as nvidia-smi lists them.
gpus=$("$build/bin/trainyard" --version | sed -n 's/.*, \([0-9]*\) GPUs* visible.*/\1/p')
gpus=${gpus:-0}
if [ "$gpus" -eq 0 ]; then
  echo "error: test-gpu: nvidia-smi lists $listed GPU(s) but LibTorch sees none" \
       "(CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES:-}'; a driver older than the wheel's CUDA?)" >&2
  exit 2
fi
filter="${GPU_TESTS:-Gpu.*:MultiGpu.*}"
shared=""
if [ "$gpus" -eq 1 ]; then
  # One GPU: the MultiGpu tests' ranks share it over Gloo (a test setting).
  shared="MultiGpu.* with 2 ranks sharing GPU 0 over Gloo (TRAINYARD_TEST_SHARED_GPU=1)"
  export TRAINYARD_TEST_SHARED_GPU=1
fi
echo "test-gpu: LibTorch sees $gpus GPU(s) of the $listed nvidia-smi lists; running $filter${shared:+; $shared}"

# TRAINYARD_EXPECT_GPUS turns "LibTorch sees no GPU" from a skip into a failure.
# Two GPUs are enough for every MultiGpu test; ranks take cuda:LOCAL_RANK.
export TRAINYARD_EXPECT_GPUS="$gpus" OMP_NUM_THREADS=1 NVIDIA_TF32_OVERRIDE=0
timeout_s="${TEST_TIMEOUT:-600}"
budget_s="${TEST_BUDGET:-0}"
case "$timeout_s$budget_s" in *[!0-9]*)
  echo "error: test-gpu: TEST_TIMEOUT='$timeout_s', TEST_BUDGET='$budget_s'; expected whole seconds" >&2; exit 2 ;;
esac
cd "$build/tests"
log=$(mktemp)
results=()
failed=0
not_run=0
suite_start=$(date +%s)
for test in $(../bin/trainyard_tests --gtest_list_tests --gtest_filter="$filter" |
              awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }'); do
  start=$(date +%s)
  if [ "$budget_s" -gt 0 ] && [ $(( start - suite_start )) -ge "$budget_s" ]; then
    results+=("$test: not run (TEST_BUDGET ${budget_s} s spent)")
    not_run=$((not_run + 1))
    continue
  fi
  # The last test may use what is left of the budget, not more.
  limit="$timeout_s"
  if [ "$budget_s" -gt 0 ] && [ $(( suite_start + budget_s - start )) -lt "$limit" ]; then
    limit=$(( suite_start + budget_s - start ))
  fi
  set +e
  timeout --kill-after=10 "$limit" ../bin/trainyard_tests --gtest_filter="$test" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  set -e
  seconds=$(( $(date +%s) - start ))
  case "$rc" in
    0) outcome=passed ;;
    124|137) outcome="TIMED OUT after ${limit} s"; failed=$((failed + 1)) ;;
    *) outcome="FAILED (exit $rc)"; failed=$((failed + 1)) ;;
  esac
  grep -q "^\[  SKIPPED \] $test" "$log" && [ "$rc" -eq 0 ] && outcome=skipped
  results+=("$test: $outcome, ${seconds} s")
done

echo
echo "=== test-gpu summary (paste into an issue) ==="
echo "machine: $(nvidia-smi --query-gpu=name,compute_cap,memory.total --format=csv,noheader | sort | uniq -c | sed 's/^ *//' | paste -sd';' -)"
echo "driver $driver; $(../bin/trainyard --version | grep '^LibTorch')"
../bin/trainyard --version | grep '^cpu: '
echo "/dev/shm: ${shm_mb:-?} MB${NCCL_SHM_DISABLE:+ (NCCL_SHM_DISABLE=1)}; LibTorch sees $gpus GPU(s); TF32 off${shared:+; $shared}"
echo "build: ${TRAINYARD_PREBUILT:+package }$(cd .. && pwd)"
printf '%s\n' "${results[@]}"
grep '^gpu-metric: ' "$log" | sort -u || true
echo "$(( ${#results[@]} - failed - not_run )) passed, $failed failed$([ "$not_run" -gt 0 ] && echo ", $not_run not run (budget)")"
rm -f "$log"
[ "$failed" -eq 0 ]
