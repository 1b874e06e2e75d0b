# Sourced by the benchmarks that take these settings from the environment.
#
# bench_kernels: KERNELS=avx2 holds LibTorch's kernels (oneDNN and ATen, both
# sides of a comparison) at AVX2 on an AVX-512 machine, the way an AVX2-only
# CPU runs them; empty leaves them at what the CPU has.
bench_kernels() {
  case "${KERNELS:-}" in
    "") ;;
    avx2) export ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 ;;
    *) echo "error: KERNELS: expected avx2 or nothing, got '$KERNELS'" >&2; exit 2 ;;
  esac
}

# bench_out_dir: sets `out` to OUT_DIR when given (created, kept: the runs and
# logs stay there), else to a temporary folder removed when the script exits.
bench_out_dir() {
  if [ -n "${OUT_DIR:-}" ]; then
    out="$OUT_DIR" && mkdir -p "$out"
  else
    out=$(mktemp -d) && trap 'rm -rf "$out"' EXIT
  fi
}
