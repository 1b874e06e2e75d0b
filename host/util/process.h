#pragma once
// Process-wide settings made once at start-up.
namespace trainyard::host {

struct ComponentConfig;

/// Keeps large tensor buffers in the heap instead of returning them to the
/// kernel after every step (glibc's default mmap/trim thresholds cost a page
/// fault storm per step: +25% samples/s on the convnet here). Skipped when the
/// user sets GLIBC_TUNABLES or TRAINYARD_DEFAULT_MALLOC=1.
void tune_allocator();

/// On SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT, prints which component was
/// running ("error: crashed with SIGSEGV in network 'x' from libx.so"), then
/// dies of the same signal.
void install_crash_reporter();

/// The component whose code runs on this thread now (set by guarded()).
const ComponentConfig*& running_component();

}  // namespace trainyard::host
