#pragma once
// The stall watchdog: a thread that watches the training thread's heartbeat
// (util/process.h: guarded component calls and iteration boundaries beat).
// When nothing beats for `stall_timeout_secs`, or a stop signal goes
// unanswered for `stop_grace_secs`, it writes every thread's stack to a file,
// prints one error line naming the component and action running, and ends
// the process with kExitStalled: a hung callback or data loader cannot hold
// a cluster allocation forever, and SIGTERM always ends the run.
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace trainyard::host {

struct WatchdogOptions {
  double stall_timeout_secs = 0;  ///< 0: off
  double stop_grace_secs = 15;    ///< 0: no limit after a stop signal
  std::string traces_path;        ///< where the stacks go (RUN_DIR/stall-rank0.txt)
};

class StallWatchdog {
 public:
  /// Marks the calling thread as the watched one and starts watching.
  explicit StallWatchdog(WatchdogOptions options);
  /// Stops watching (and unmarks the thread).
  ~StallWatchdog();
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

 private:
  void watch();
  [[noreturn]] void fire(const std::string& why);

  WatchdogOptions options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace trainyard::host
