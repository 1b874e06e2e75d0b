#pragma once
// Process-wide settings made once at start-up.
#include <string>
#include <vector>

namespace trainyard::host {

/// Exit code of a run stopped by a signal after writing its checkpoint: run
/// the same command again to continue (0 ok, 1 failure, 2 bad input).
constexpr int kExitStoppedResumable = 4;

/// The stop signals a run accepts, by name (loop.stop_signals).
const std::vector<std::string>& stop_signal_names();
/// SIGINT, SIGTERM, SIGUSR1, ... (those named) only set a flag, read at the
/// next iteration boundary; a second SIGINT aborts at once.
void install_stop_signals(const std::vector<std::string>& names);
/// The first stop signal received, or 0.
int stop_signal_received();
/// "SIGTERM".
std::string signal_name(int signo);

/// Keeps large tensor buffers in the heap instead of returning them to the
/// kernel after every step (glibc's default mmap/trim thresholds cost a page
/// fault storm per step: +25% samples/s on the convnet here). Skipped when the
/// user sets GLIBC_TUNABLES or TRAINYARD_DEFAULT_MALLOC=1.
void tune_allocator();

/// On SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT, prints which component was
/// running ("error: crashed with SIGSEGV in network 'x' from libx.so"), then
/// dies of the same signal.
void install_crash_reporter();

/// What runs on this thread now, as the crash report names it ("network
/// 'mlp' (network) from libmlp.so"; set by guarded()), or null. The text must
/// outlive the setting: the signal handler only writes it.
const char*& running_component();

}  // namespace trainyard::host
