# Sourced by every benchmark: what it runs on, printed first, since figures
# differ by CPU kind (bf16 is native with AVX512-BF16 or AMX-BF16 and
# emulated, several times slower, elsewhere; AVX2-only machines lack both).
# Prints the CPU model, its ISA flags that matter to LibTorch's kernels, and
# trainyard's own reading (LibTorch's cpuinfo and ATen's kernel level, with
# ONEDNN_MAX_CPU_ISA / ATEN_CPU_CAPABILITY when set).
bench_cpu_header() {
  local bin="${1:-build/bin/trainyard}" flags
  flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|avx512_fp16|amx_bf16|amx_tile|avx_vnni|fma)$' | tr '\n' ' ')
  echo "CPU: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo); $(nproc) cores here; ISA flags: ${flags:-none of avx2/avx512}"
  [ -x "$bin" ] && "$bin" --version | sed -n 's/^cpu: /trainyard reads: /p'
  for v in ONEDNN_MAX_CPU_ISA ATEN_CPU_CAPABILITY; do
    [ -n "${!v:-}" ] && echo "$v=${!v} (set for this run: kernels held below what the CPU has)"
  done
  return 0
}
