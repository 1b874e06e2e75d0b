#include "util/watchdog.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

#include "util/process.h"

namespace trainyard::host {
namespace {

double seconds_since(int64_t steady_ns) {
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  return static_cast<double>(now - steady_ns) / 1e9;
}

// "callback 'hang' (callback) from libx.so in after_epoch", or where the
// training thread waits when no component runs.
std::string running_now() {
  const WatchedProgress& p = watched_progress();
  const char* component = p.component.load();
  const char* action = p.action.load();
  std::string where = component ? std::string(component) + (action ? std::string(" in ") + action : "")
                                : "the host (waiting for data, another rank, or a file write; no component running)";
  return where + ", at epoch " + std::to_string(p.epoch.load() + 1) + ", iteration " +
         std::to_string(p.iteration.load());
}

}  // namespace

StallWatchdog::StallWatchdog(WatchdogOptions options) : options_(std::move(options)) {
  this_thread_watched() = true;
  heartbeat();
  // The grace after a stop signal holds also when the stall limit is off.
  if (options_.stall_timeout_secs > 0 || options_.stop_grace_secs > 0) thread_ = std::thread([this] { watch(); });
}

StallWatchdog::~StallWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  this_thread_watched() = false;
}

void StallWatchdog::watch() {
  // Checks a few times per timeout, and at least every second.
  const double shortest = options_.stall_timeout_secs > 0
                              ? std::min(options_.stall_timeout_secs, options_.stop_grace_secs)
                              : options_.stop_grace_secs;
  const auto period = std::chrono::duration<double>(std::clamp(shortest / 4, 0.05, 1.0));
  int64_t signal_seen_ns = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    const int64_t beat = watched_progress().beat_ns.load(std::memory_order_relaxed);
    const double quiet = seconds_since(beat);
    if (options_.stall_timeout_secs > 0 && quiet > options_.stall_timeout_secs)
      fire("no progress for " + std::to_string(static_cast<int64_t>(std::floor(quiet))) +
           " s (loop.stall_timeout_secs " + std::to_string(static_cast<int64_t>(options_.stall_timeout_secs)) + ")");
    if (options_.stop_grace_secs > 0 && stop_signal_received() != 0) {
      if (signal_seen_ns == 0) signal_seen_ns = std::chrono::steady_clock::now().time_since_epoch().count();
      // The grace runs from the signal or the last progress, whichever is later.
      const double waited = seconds_since(std::max(signal_seen_ns, beat));
      if (waited > options_.stop_grace_secs)
        fire(signal_name(stop_signal_received()) + " received, but the loop did not reach a boundary within " +
             std::to_string(static_cast<int64_t>(options_.stop_grace_secs)) + " s (loop.stop_grace_secs)");
    }
  }
}

void StallWatchdog::fire(const std::string& why) {
  const std::string running = running_now();
  std::string traces = " (no stack traces: cannot write " + options_.traces_path + ")";
  const int fd = ::open(options_.traces_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    const std::string head = "trainyard stall watchdog: " + why + "; running: " + running +
                             "\nframes read FILE(+OFFSET): `addr2line -f -C -e FILE OFFSET` names each one\n";
    (void)!::write(fd, head.data(), head.size());
    write_thread_stacks(fd);
    ::fsync(fd);
    ::close(fd);
    traces = "; stack traces of every thread in " + options_.traces_path;
  }
  // The next run finds the run directory free; the last checkpoint written
  // is whole (checkpoints are renamed into place only once complete), and
  // the line names it.
  release_abort_lock();
  std::cerr << "error: stalled: " << why << "; running: " << running << traces << whole_checkpoint_clause()
            << " (exit code " << kExitStalled << ")" << std::endl;
  std::cout.flush();
  _exit(kExitStalled);
}

}  // namespace trainyard::host
