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
# Ends with a summary to paste into an issue. Installs and builds as
# scripts/test.sh does.
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

# --- What the wheel needs from this machine --------------------------------------
min_driver=580
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1 | tr -d ' ')
if [ "${driver%%.*}" -lt "$min_driver" ] 2>/dev/null; then
  echo "error: test-gpu: NVIDIA driver $driver; expected >= $min_driver for the CUDA 13.2 torch wheel;" \
       "install a newer driver, or set TRAINYARD_TORCH_VERSION to a torch built for an older CUDA" >&2
  exit 2
fi
unsupported=$(nvidia-smi --query-gpu=index,name,compute_cap --format=csv,noheader |
  awk -F', ' '{ split($3, c, "."); cap = c[1] * 10 + c[2]; if (cap < 75 || cap > 120) print "GPU " $1 " (" $2 ", compute capability " $3 ")" }')
if [ -n "$unsupported" ]; then
  echo "error: test-gpu: $unsupported: the torch wheel has kernels for compute capability 7.5 to 12.0 only;" \
       "expected a GPU from Turing (T4) on" >&2
  exit 2
fi
shm_mb=$(df -Pm /dev/shm 2>/dev/null | awk 'NR == 2 { print $2 }')
if [ -n "$shm_mb" ] && [ "$shm_mb" -lt 1024 ]; then
  echo "test-gpu: warning: /dev/shm is ${shm_mb} MB; NCCL's shared-memory transport needs more between" \
       "processes of one machine (docker: --shm-size=8g, or --ipc=host); NCCL_SHM_DISABLE=1 for this run" >&2
  export NCCL_SHM_DISABLE=1
fi

bash scripts/install-deps.sh
bash scripts/build.sh

# GPUs as LibTorch sees them (CUDA_VISIBLE_DEVICES, MIG instances), not as nvidia-smi lists them.
gpus=$(build/bin/trainyard --version | sed -n 's/.*, \([0-9]*\) GPUs* visible.*/\1/p')
gpus=${gpus:-0}
if [ "$gpus" -eq 0 ]; then
  echo "error: test-gpu: nvidia-smi lists $listed GPU(s) but LibTorch sees none" \
       "(CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES:-}'; a driver older than the wheel's CUDA?)" >&2
  exit 2
fi
filter='Gpu.*'
[ "$gpus" -ge 2 ] && filter='Gpu.*:MultiGpu.*'
echo "test-gpu: LibTorch sees $gpus GPU(s) of the $listed nvidia-smi lists; running $filter"

# TRAINYARD_EXPECT_GPUS turns "LibTorch sees no GPU" from a skip into a failure.
# Two GPUs are enough for every MultiGpu test; ranks take cuda:LOCAL_RANK.
export TRAINYARD_EXPECT_GPUS="$gpus" OMP_NUM_THREADS=1 NVIDIA_TF32_OVERRIDE=0
timeout_s="${TEST_TIMEOUT:-600}"
cd build/tests
log=$(mktemp)
results=()
failed=0
for test in $(../bin/trainyard_tests --gtest_list_tests --gtest_filter="$filter" |
              awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }'); do
  start=$(date +%s)
  set +e
  timeout --kill-after=10 "$timeout_s" ../bin/trainyard_tests --gtest_filter="$test" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  set -e
  seconds=$(( $(date +%s) - start ))
  case "$rc" in
    0) outcome=passed ;;
    124|137) outcome="TIMED OUT after ${timeout_s} s"; failed=$((failed + 1)) ;;
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
echo "/dev/shm: ${shm_mb:-?} MB${NCCL_SHM_DISABLE:+ (NCCL_SHM_DISABLE=1)}; LibTorch sees $gpus GPU(s); TF32 off"
printf '%s\n' "${results[@]}"
grep '^gpu-metric: ' "$log" | sort -u || true
echo "$(( ${#results[@]} - failed )) passed, $failed failed"
rm -f "$log"
[ "$failed" -eq 0 ]
