#pragma once
// One run per run directory. A training run holds RUN_DIR.lock (beside the
// run directory, so --fresh can rename the directory under it) for its whole
// life: an flock(2) the kernel releases when the process ends however it
// ends, plus a record of the holder (host, PID, start, launcher job) and a
// heartbeat (the file's mtime, renewed every 10 s) for file systems whose
// locks are not shared between machines. docs/reliability.md, "One run per
// run directory", says how it behaves on NFS.
#include <chrono>
#include <memory>
#include <string>

namespace trainyard::host {

/// Who holds (or held) a run directory: the lock file's record.
struct LockHolder {
  std::string host;
  long pid = 0;
  std::string started;  ///< UTC, ISO 8601
  std::string job;      ///< "Slurm job 42", "torchrun run ID", or ""
  std::string command;
  /// "host H, PID P, since T (Slurm job 42)"
  std::string describe() const;
};

struct RunLockSettings {
  /// How long to wait when the holder is an earlier step of this same Slurm
  /// job (a requeued job whose previous step is still writing its last
  /// checkpoint). TRAINYARD_RUN_LOCK_WAIT seconds overrides it.
  std::chrono::seconds wait_for_same_job{120};
  /// A lock record whose heartbeat is older than this, on another machine,
  /// is stale (the holder is gone, or its machine is).
  std::chrono::seconds stale_after{60};
};

class RunLock {
 public:
  /// Takes the lock of `run_dir`, creating its parent folder if needed.
  /// Throws ConfigError naming the holder when another run holds it; takes a
  /// stale one over with a warning.
  static std::unique_ptr<RunLock> acquire(const std::string& run_dir, const RunLockSettings& settings = {});
  /// Releases it: removes the lock file (and the parent folder, if this lock
  /// created it and nothing else was written there).
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  const std::string& path() const { return path_; }
  const LockHolder& holder() const { return me_; }

 private:
  RunLock(std::string path, int fd, LockHolder me, std::string created_parent);
  struct Heartbeat;
  std::string path_;
  int fd_ = -1;
  LockHolder me_;
  std::string created_parent_;
  std::unique_ptr<Heartbeat> heartbeat_;
};

/// "RUN_DIR.lock"
std::string run_lock_path(const std::string& run_dir);
/// The record in a lock file; nullopt-like empty host when there is none.
LockHolder read_lock_holder(const std::string& lock_path);
/// This process as a lock holder (host, PID, now, the launcher's job).
LockHolder this_process_as_holder();

}  // namespace trainyard::host
