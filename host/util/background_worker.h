#pragma once
// One task at a time on a thread of its own, for work the training thread
// should not wait for (a checkpoint's serialisation, hashing and fsync). At
// most one task is in flight: starting another first waits for it. A task's
// failure is never lost: the next start() or wait() rethrows it, and a worker
// destroyed with a failure nobody collected logs it as an error line.
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace trainyard::host {

class BackgroundWorker {
 public:
  /// `what` names the work in the error line of a failure nobody collected.
  explicit BackgroundWorker(std::string what);
  /// Waits for the task in flight; logs a failure nobody collected.
  ~BackgroundWorker();
  BackgroundWorker(const BackgroundWorker&) = delete;
  BackgroundWorker& operator=(const BackgroundWorker&) = delete;

  /// Waits for the task in flight (rethrowing its failure, `task` is then not
  /// started), then starts `task` on the worker's thread.
  void start(std::function<void()> task);
  /// Runs `then` on the worker's thread once the task in flight succeeded (a
  /// failed task skips it), or at once on the calling thread when none is in
  /// flight. A failure of `then` is the task's.
  void after_current(std::function<void()> then);
  /// Waits for the task in flight and rethrows its failure (once).
  void wait();
  /// Waits for the task in flight; a failure stays to be collected.
  void wait_quietly();
  /// A task is in flight.
  bool busy() const;

 private:
  void loop();
  void wait_locked(std::unique_lock<std::mutex>& lock);

  std::string what_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> work_;  ///< the task in flight, then what follows it
  bool busy_ = false;                       ///< work_ is being run (or about to be)
  bool stopping_ = false;
  std::exception_ptr failure_;
  std::thread thread_;  ///< last: started once the members above exist
};

}  // namespace trainyard::host
