#include "run/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "log/log.h"
#include "trainyard/error.h"
#include "util/json.h"
#include "util/process.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

constexpr auto kHeartbeatEvery = std::chrono::seconds(10);

std::string now_utc() {
  char text[32];
  std::time_t t = std::time(nullptr);
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : raw)
    if (c == '\0') c = ' ';
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw.size() > 300 ? raw.substr(0, 300) + "..." : raw;
}

LockHolder parse_holder(const std::string& text) {
  LockHolder h;
  try {
    const auto j = parse_json(text);
    h.host = j.value("host", "");
    h.pid = j.value("pid", 0L);
    h.started = j.value("started", "");
    h.job = j.value("job", "");
    h.command = j.value("command", "");
  } catch (const std::exception&) {
    // An empty or half-written record: no holder is known.
  }
  return h;
}

std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, at);
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
    at += n;
  }
  return text;
}

std::string link_target(const std::string& path) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(path, ec);
  return ec ? "an unreadable target" : target.string();
}

std::string file_kind(const std::string& path) {
  std::error_code ec;
  switch (fs::symlink_status(path, ec).type()) {
    case fs::file_type::directory:
      return "a folder";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::block:
    case fs::file_type::character:
      return "a device";
    default:
      return "not a regular file";
  }
}

bool same_file(int fd, const std::string& path) {
  struct stat open_one {
  }, named{};
  return ::fstat(fd, &open_one) == 0 && ::stat(path.c_str(), &named) == 0 && open_one.st_dev == named.st_dev &&
         open_one.st_ino == named.st_ino;
}

long heartbeat_age_seconds(int fd) {
  struct stat s {};
  if (::fstat(fd, &s) != 0) return 0;
  return static_cast<long>(std::time(nullptr) - s.st_mtime);
}

ConfigError held_by(const std::string& run_dir, const std::string& lock, const LockHolder& holder,
                    const std::string& detail) {
  return ConfigError(run_dir + ": another run is using this run directory (" +
                         (holder.host.empty() ? std::string("holder unknown") : holder.describe()) + detail +
                         "; lock file " + lock + ")",
                     "expected a run directory no other run writes",
                     "wait for that run to end (or stop it), or give this run another --output-dir or name");
}

void write_record(int fd, const std::string& lock, const LockHolder& me) {
  nlohmann::ordered_json j;
  j["host"] = me.host;
  j["pid"] = me.pid;
  j["started"] = me.started;
  j["job"] = me.job;
  j["command"] = me.command;
  const std::string text = json_text(j, true) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
      ::fsync(fd) != 0)
    throw ConfigError(lock + ": cannot write the run lock: " + std::strerror(errno),
                      "expected a writable output folder", "check the folder's permissions and free space");
}

std::chrono::seconds wait_setting(const RunLockSettings& settings) {
  if (const char* env = std::getenv("TRAINYARD_RUN_LOCK_WAIT"); env && *env) {
    char* end = nullptr;
    const long seconds = std::strtol(env, &end, 10);
    if (*end == '\0' && seconds >= 0) return std::chrono::seconds(seconds);
    log_warning("warning: TRAINYARD_RUN_LOCK_WAIT='" + std::string(env) +
                "' is not a number of seconds; waiting the default " +
                std::to_string(settings.wait_for_same_job.count()) + " s");
  }
  return settings.wait_for_same_job;
}

}  // namespace

std::string LockHolder::describe() const {
  return "host " + host + ", PID " + std::to_string(pid) + ", since " + started + (job.empty() ? "" : ", " + job);
}

std::string run_lock_path(const std::string& run_dir) {
  fs::path dir(run_dir);
  if (!dir.has_filename()) dir = dir.parent_path();  // "runs/x/" names runs/x
  return dir.string() + ".lock";
}

LockHolder read_lock_holder(const std::string& lock_path) {
  std::ifstream in(lock_path);
  return parse_holder(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
}

LockHolder this_process_as_holder() {
  LockHolder me;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  me.host = host;
  me.pid = static_cast<long>(::getpid());
  me.started = now_utc();
  // The job, so that a requeued Slurm job recognises its own earlier step.
  if (const char* job = std::getenv("SLURM_JOB_ID"); job && *job)
    me.job = "Slurm job " + std::string(job);
  else if (const char* run = std::getenv("TORCHELASTIC_RUN_ID"); run && *run)
    me.job = "torchrun run " + std::string(run);
  me.command = own_command_line();
  return me;
}

// Renews the lock file's mtime, so that a machine that cannot see the
// holder's flock (NFS without shared locks) still sees it is alive.
struct RunLock::Heartbeat {
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;

  explicit Heartbeat(int fd)
      : thread([this, fd] {
          std::unique_lock<std::mutex> hold(mutex);
          while (!wake.wait_for(hold, kHeartbeatEvery, [this] { return stop; })) ::futimens(fd, nullptr);
        }) {}
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> hold(mutex);
      stop = true;
    }
    wake.notify_all();
    thread.join();
  }
};

RunLock::RunLock(std::string path, int fd, LockHolder me, std::string created_parent)
    : path_(std::move(path)),
      fd_(fd),
      me_(std::move(me)),
      created_parent_(std::move(created_parent)),
      heartbeat_(std::make_unique<Heartbeat>(fd)) {}

RunLock::~RunLock() {
  set_startup_leftovers({});
  set_abort_lock_path("");
  heartbeat_.reset();
  // Removed while still held, and only if it is still ours.
  if (same_file(fd_, path_)) ::unlink(path_.c_str());
  ::close(fd_);
  // A folder made only to hold the lock goes with it (bad input writes nothing).
  if (!created_parent_.empty()) {
    std::error_code ignored;
    for (fs::path dir = fs::path(path_).parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (!fs::remove(dir, ignored)) break;  // not empty (the run wrote there), or gone
      if (dir == fs::path(created_parent_)) break;
    }
  }
}

std::unique_ptr<RunLock> RunLock::acquire(const std::string& run_dir, const RunLockSettings& settings) {
  const std::string lock = run_lock_path(run_dir);
  fs::path parent = fs::path(lock).parent_path();
  std::string created_parent;
  if (!parent.empty() && !fs::exists(parent)) {
    fs::path top = parent;
    while (top.has_parent_path() && top.parent_path() != top && !fs::exists(top.parent_path())) top = top.parent_path();
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec)
      throw ConfigError(parent.string() + ": cannot create the output folder: " + ec.message(),
                        "expected a writable output folder", "check --output-dir (or output.dir)");
    created_parent = top.string();
  }
  const LockHolder me = this_process_as_holder();
  const auto deadline = std::chrono::steady_clock::now() + wait_setting(settings);
  bool announced = false;
  for (;;) {
    // Never through a link (one planted in a shared output folder would make
    // the run overwrite its target), never a FIFO or device (O_NONBLOCK: a
    // FIFO would block the open).
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0 && errno == ELOOP)
      throw ConfigError(lock + ": the run lock is a symbolic link (to " + link_target(lock) + ")",
                        "expected a regular file that trainyard creates, or none",
                        "remove the link; trainyard never writes through links in the output folder");
    if (fd < 0)
      throw ConfigError(lock + ": cannot open the run lock: " + std::strerror(errno),
                        "expected a writable output folder", "check the folder's permissions");
    if (struct stat opened{}; ::fstat(fd, &opened) != 0 || !S_ISREG(opened.st_mode)) {
      ::close(fd);
      throw ConfigError(lock + ": the run lock is not a regular file (" + file_kind(lock) + ")",
                        "expected a regular file that trainyard creates, or none", "remove it");
    }
    if (struct stat opened{}; ::fstat(fd, &opened) == 0 && opened.st_nlink > 1) {
      ::close(fd);  // a hard link to another file: writing the record would change that file
      throw ConfigError(lock + ": the run lock has " + std::to_string(opened.st_nlink) + " hard links",
                        "expected a file of its own that trainyard creates, or none", "remove it");
    }
    const bool locked = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    const int lock_errno = errno;
    if (locked && !same_file(fd, lock)) {
      ::close(fd);  // its holder removed it as it ended: lock the new one
      continue;
    }
    const LockHolder previous = parse_holder(read_all(fd));
    const long age = heartbeat_age_seconds(fd);
    if (!locked && lock_errno == EWOULDBLOCK) {
      // An earlier step of this same Slurm job (a requeue) is still ending: wait for it.
      if (me.job.rfind("Slurm job ", 0) == 0 && previous.job == me.job && std::chrono::steady_clock::now() < deadline) {
        if (!announced)
          InfoLine() << "trainyard: " << lock << " is held by an earlier step of " << me.job << " ("
                     << previous.describe() << "); waiting for it to end\n";
        announced = true;
        ::close(fd);
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        continue;
      }
      ::close(fd);
      throw held_by(run_dir, lock, previous, announced ? "; waited for it to end, in vain" : "");
    }
    if (!locked)
      // No flock on this file system (ENOLCK, EOPNOTSUPP): the heartbeat alone tells.
      log_warning("warning: " + lock + ": the file system refuses flock (" + std::strerror(lock_errno) +
                  "); the run lock relies on its heartbeat alone");
    if (!previous.host.empty()) {
      // The kernel released the holder's lock: it ended. Unless it is on another
      // machine whose locks this one does not see; then its heartbeat tells.
      const bool other_machine_alive = (previous.host != me.host || !locked) && age < settings.stale_after.count();
      if (other_machine_alive) {
        ::close(fd);
        throw held_by(run_dir, lock, previous,
                      "; its heartbeat is " + std::to_string(age) +
                          " s old, and this machine cannot see that machine's lock (a network file system)");
      }
      log_warning("warning: " + lock + ": taking over the lock of a run that ended without releasing it (" +
                  previous.describe() + "; " +
                  (previous.host == me.host && locked ? std::string("no process holds it")
                                                      : "no heartbeat for " + std::to_string(age) + " s") +
                  ")");
    }
    try {
      write_record(fd, lock, me);
    } catch (...) {
      ::close(fd);
      throw;
    }
    // A stop signal during start-up ends the process at once: it takes these along.
    std::vector<std::string> leftovers{lock};
    if (!created_parent.empty())
      for (fs::path dir = parent; !dir.empty(); dir = dir.parent_path()) {
        leftovers.push_back(dir.string());
        if (dir == fs::path(created_parent) || leftovers.size() == 4) break;
      }
    set_startup_leftovers(leftovers);
    set_abort_lock_path(lock);  // the watchdog and a second SIGINT free it too
    return std::unique_ptr<RunLock>(new RunLock(lock, fd, me, created_parent));
  }
}

}  // namespace trainyard::host
