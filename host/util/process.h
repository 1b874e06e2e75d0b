#pragma once
// Process-wide settings made once at start-up.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace trainyard::host {

/// Exit code of a run stopped by a signal after writing its checkpoint: run
/// the same command again to continue (0 ok, 1 failure, 2 bad input).
constexpr int kExitStoppedResumable = 4;
/// Exit code of a run the stall watchdog ended: no step completed within
/// loop.stall_timeout_secs, or a stop signal was not answered within
/// loop.stop_grace_secs. The run lock is released; the run resumes from its
/// last checkpoint written (none is written at that moment).
constexpr int kExitStalled = 5;

/// The stop signals a run accepts, by name (loop.stop_signals).
const std::vector<std::string>& stop_signal_names();
/// SIGINT, SIGTERM, SIGUSR1, ... (those named) only set a flag, read at the
/// next iteration boundary; the acknowledgement names the signal and what
/// runs at that moment (component and event, epoch, iteration, for how long),
/// so that a log cut short by a scheduler's kill still says what held the
/// loop. A second SIGINT aborts at once with an error line naming what ran
/// and the whole checkpoint, releases the run lock and dies of SIGINT (exit 130).
void install_stop_signals(const std::vector<std::string>& names);
/// Until the loop begins: the stop signals named end the process at once
/// (exit kExitStoppedResumable, one line saying nothing was written), since
/// start-up (plugins, data loading) has no boundary to stop at.
void install_startup_stop_signals(const std::vector<std::string>& names);
/// What a stop signal during start-up removes before the process ends, so
/// that it leaves nothing behind (the run lock, a folder made only for it):
/// at most 4 paths, in order; a file is unlinked, a folder removed if empty.
/// An empty list clears them.
void set_startup_leftovers(const std::vector<std::string>& paths);
/// Before main() runs (an ELF preinit function of the executable, ahead of
/// LibTorch's static initialisers): SIGINT, SIGTERM and SIGUSR1 end the
/// process with one line and kExitStoppedResumable instead of silently.
/// Allocates nothing: it runs before the C++ runtime is initialised.
void install_early_stop_signals();
/// Back to the default dispositions of the early stop signals, for commands
/// that neither train nor start ranks (export, validate, ...).
void restore_default_stop_signals();
/// The run lock file to remove when the process is ended abruptly (the
/// watchdog, a second SIGINT), so the next run need not take it over; ""
/// clears it. Kept in a fixed buffer: read by signal handlers.
void set_abort_lock_path(const std::string& path);
/// Removes that file (async-signal-safe).
void release_abort_lock();
/// The first stop signal received, or 0.
int stop_signal_received();
/// The checkpoint a rerun of the same command resumes from: recorded when a
/// checkpoint is whole (renamed into place) and when a run resumes from one,
/// so that an abrupt end (a second SIGINT, the stall watchdog) names it, or
/// says that none was written. Kept in fixed buffers: a signal handler reads it.
void record_whole_checkpoint(const std::string& path);
/// "; the last checkpoint written, PATH, is whole: run the same command to
/// resume from it" or "; no checkpoint was written: ...": the end of those lines.
std::string whole_checkpoint_clause();
/// On a rank other than 0: the checkpoints are rank 0's, and this rank never
/// learns when one is whole; its abrupt-end lines say so instead of naming one.
void checkpoints_are_rank_zeros();
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
/// What that component does now ("forward", "after_epoch"), or null.
const char*& running_action();

/// The training thread's progress, read by the stall watchdog on another
/// thread: a heartbeat and what runs now. Only a thread marked watched
/// writes it (decode threads do not).
struct WatchedProgress {
  std::atomic<int64_t> beat_ns{0};              ///< steady-clock time of the last sign of progress
  std::atomic<const char*> component{nullptr};  ///< crash label of the component running, or null
  std::atomic<const char*> action{nullptr};
  std::atomic<int64_t> epoch{0}, iteration{0};
};
WatchedProgress& watched_progress();
/// Whether this thread reports to watched_progress().
bool& this_thread_watched();
/// Records progress now (a relaxed atomic store: cheap enough per step).
void heartbeat();

/// Writes a stack trace of every thread of this process to `fd` (each
/// thread is interrupted by a signal whose handler writes its own frames).
void write_thread_stacks(int fd);

/// From now on, exit() called from anywhere but the host's own return from
/// main() is reported on stderr as an error naming the component and action
/// running on the calling thread, and the process exits with status 1
/// (a plugin that calls exit(0) must not pass for success).
void guard_against_exit();
/// Registers the report again when guard_against_exit() was called, so that
/// it runs before the static destructors of everything loaded since.
void renew_exit_guard();
/// main() returns: exit() from here on is the host's own.
void allow_exit();

}  // namespace trainyard::host
