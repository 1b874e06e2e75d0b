#include "util/background_worker.h"

#include <utility>

#include "log/log.h"

namespace trainyard::host {

BackgroundWorker::BackgroundWorker(std::string what) : what_(std::move(what)), thread_([this] { loop(); }) {}

BackgroundWorker::~BackgroundWorker() {
  std::exception_ptr failure;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wait_locked(lock);
    stopping_ = true;
    failure = std::exchange(failure_, nullptr);
  }
  changed_.notify_all();
  thread_.join();
  if (!failure) return;
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    log_error(std::string("error: ") + e.what());
  } catch (...) {
    log_error("error: " + what_ + " failed");
  }
}

void BackgroundWorker::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !work_.empty(); });
    if (work_.empty()) return;  // stopping, nothing left
    while (!work_.empty()) {
      std::function<void()> next = std::move(work_.front());
      work_.pop_front();
      lock.unlock();
      std::exception_ptr failure;
      try {
        next();
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      if (failure) {
        failure_ = failure;
        work_.clear();  // what follows a failed task is skipped
      }
    }
    busy_ = false;
    changed_.notify_all();
  }
}

void BackgroundWorker::wait_locked(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [&] { return !busy_; });
}

void BackgroundWorker::start(std::function<void()> task) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wait_locked(lock);
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
    work_.push_back(std::move(task));
    busy_ = true;
  }
  changed_.notify_all();
}

void BackgroundWorker::after_current(std::function<void()> then) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_) return;  // the task failed: nothing to follow it (its failure is told at the next start or wait)
    if (busy_) {
      work_.push_back(std::move(then));
      return;
    }
  }
  then();
}

void BackgroundWorker::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_locked(lock);
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

void BackgroundWorker::wait_quietly() {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_locked(lock);
}

bool BackgroundWorker::busy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return busy_;
}

}  // namespace trainyard::host
