#include "util/process.h"

#include <dirent.h>
#include <execinfo.h>
#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <utility>

namespace trainyard::host {

void tune_allocator() {
  if (std::getenv("GLIBC_TUNABLES") || std::getenv("TRAINYARD_DEFAULT_MALLOC")) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // buffers up to 32 MiB come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and stay there between steps
}

const char*& running_component() {
  static thread_local const char* current = nullptr;
  return current;
}

const char*& running_action() {
  static thread_local const char* current = nullptr;
  return current;
}

WatchedProgress& watched_progress() {
  static WatchedProgress progress;
  return progress;
}

bool& this_thread_watched() {
  static thread_local bool watched = false;
  return watched;
}

void heartbeat() {
  watched_progress().beat_ns.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                                   std::memory_order_relaxed);
}

namespace {

void say(const char* text) {
  if (text) (void)!::write(STDERR_FILENO, text, strlen(text));
}

void on_fatal_signal(int signo) {
  // Only async-signal-safe calls: write(2) of strings that already exist.
  say("error: crashed with ");
  say(sigabbrev_np(signo) ? "SIG" : "signal");
  say(sigabbrev_np(signo));
  if (const char* who = running_component()) {
    say(" in ");
    say(who);
  } else {
    say(" outside any component (in the host or LibTorch)");
  }
  say("\n");
  signal(signo, SIG_DFL);
  raise(signo);
}

// A decimal number without allocating, for the signal handlers.
void say_number(int64_t value) {
  char digits[24];
  int n = 0;
  const bool negative = value < 0;
  uint64_t v = negative ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < 22);
  if (negative) digits[n++] = '-';
  char text[24];
  for (int i = 0; i < n; ++i) text[i] = digits[n - 1 - i];
  text[n] = '\0';
  say(text);
}

// The last whole checkpoint: two buffers, the one `g_whole_current` names
// complete; a new path is written into the other and then named.
char g_whole[2][4096];
volatile sig_atomic_t g_whole_current = -1;
volatile sig_atomic_t g_checkpoints_elsewhere = 0;
// The clause's texts, for the signal handler (say_whole_checkpoint) and the
// watchdog (whole_checkpoint_clause) alike.
constexpr const char* kCheckpointsElsewhere =
    "; rank 0 writes the checkpoints: run the same command to resume from the last one it completed";
constexpr const char* kNoCheckpoint =
    "; no checkpoint was written: run the same command to start again from the beginning";
constexpr const char* kWholeBefore = "; the last checkpoint written, ";
constexpr const char* kWholeAfter = ", is whole: run the same command to resume from it";

void say_whole_checkpoint() {
  const int current = g_whole_current;
  if (g_checkpoints_elsewhere || current < 0) {
    say(g_checkpoints_elsewhere ? kCheckpointsElsewhere : kNoCheckpoint);
    return;
  }
  say(kWholeBefore);
  say(g_whole[current]);
  say(kWholeAfter);
}

// Seconds since the last sign of progress (a component's call began there),
// to a tenth: "12.3".
void say_seconds_since(int64_t steady_ns) {
  struct timespec now {};
  clock_gettime(CLOCK_MONOTONIC, &now);  // steady_clock's clock, and async-signal-safe
  const int64_t tenths = (static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec - steady_ns) / 100000000;
  say_number(tenths / 10);
  say(".");
  say_number(tenths % 10);
}

// "callback 'hang' (callback) from libx.so in after_epoch, at epoch 1,
// iteration 16", from the watched thread's progress (lock-free atomics).
void say_what_runs() {
  const WatchedProgress& p = watched_progress();
  if (const char* component = p.component.load()) {
    say(component);
    if (const char* action = p.action.load()) {
      say(" in ");
      say(action);
    }
  } else {
    say("the host (no component running)");
  }
  say(", at epoch ");
  say_number(p.epoch.load() + 1);
  say(", iteration ");
  say_number(p.iteration.load());
}

char g_abort_lock[4096];

volatile sig_atomic_t g_stop_signal = 0;

// Paths the start-up stop handler removes (set_startup_leftovers).
char g_leftovers[4][4096];
volatile sig_atomic_t g_leftover_count = 0;

void on_startup_stop_signal(int signo) {
  for (int i = 0; i < g_leftover_count; ++i)
    if (unlink(g_leftovers[i]) != 0) rmdir(g_leftovers[i]);  // both async-signal-safe
  say("trainyard: ");
  say(sigabbrev_np(signo) ? "SIG" : "a signal");
  say(sigabbrev_np(signo));
  say(" during start-up: stopped before training began; run the same command to start again\n");
  _exit(kExitStoppedResumable);
}

}  // namespace

void set_startup_leftovers(const std::vector<std::string>& paths) {
  g_leftover_count = 0;
  int n = 0;
  for (const auto& p : paths) {
    if (n == 4 || p.size() >= sizeof g_leftovers[0]) break;
    memcpy(g_leftovers[n], p.c_str(), p.size() + 1);
    ++n;
  }
  g_leftover_count = n;
}

namespace {

// Stack traces: the watchdog writes a header, signals one thread, and waits
// for its handler to write that thread's frames.
int g_trace_fd = -1;
volatile sig_atomic_t g_trace_done = 0;

void on_trace_signal(int) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, g_trace_fd);
  g_trace_done = 1;
}

std::atomic<bool> g_exit_allowed{false};

void on_exit_call() {
  if (g_exit_allowed.load()) return;
  say("error: ");
  if (const char* who = running_component()) {
    say(who);
    say(" called exit()");
    if (const char* action = running_action()) {
      say(" in ");
      say(action);
    }
    say("; a component must throw an exception to fail, never end the process\n");
  } else {
    say("exit() was called outside the host's own exit (by a component's thread or a library); the run did not "
        "finish\n");
  }
  _exit(1);
}

void on_stop_signal(int signo) {
  if (g_stop_signal != 0 && signo == SIGINT) {
    // The user insists: no checkpoint. Say what was running (it is what kept
    // the loop from its boundary), free the run directory, die of SIGINT.
    say("\nerror: second SIGINT: aborted without a checkpoint while running ");
    say_what_runs();
    say_whole_checkpoint();
    say(" (exit code 130)\n");
    release_abort_lock();
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
    return;
  }
  if (g_stop_signal == 0) {
    g_stop_signal = signo;
    // Said now, not at the boundary: a scheduler may kill the process before
    // the loop gets there, and then this line is what the log says of it.
    say("\ntrainyard: ");
    say(sigabbrev_np(signo) ? "SIG" : "a stop signal");
    say(sigabbrev_np(signo));
    say(" received while running ");
    say_what_runs();
    if (const int64_t beat = watched_progress().beat_ns.load(std::memory_order_relaxed); beat != 0) {
      say(" (for ");
      say_seconds_since(beat);
      say(" s)");
    }
    say(": finishing this iteration, writing a checkpoint, then exiting (resumable); SIGINT again aborts at "
        "once\n");
  }
}

}  // namespace

// The signals loop.stop_signals may name: the one list behind the
// experiment's choices and the handlers installed.
const std::pair<const char*, int> kStopSignals[] = {
    {"SIGINT", SIGINT}, {"SIGTERM", SIGTERM}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGHUP", SIGHUP}};

const std::vector<std::string>& stop_signal_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [name, signo] : kStopSignals) v.push_back(name);
    return v;
  }();
  return names;
}

std::string signal_name(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signo);
}

namespace {
// `handler` for each signal of kStopSignals that `names` lists.
void install_for(const std::vector<std::string>& names, void (*handler)(int), int flags) {
  for (const auto& [name, signo] : kStopSignals) {
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    struct sigaction action {};
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = flags;
    sigaction(signo, &action, nullptr);
  }
}
}  // namespace

void install_stop_signals(const std::vector<std::string>& names) {
  // SA_RESTART: blocking reads and collectives carry on; the flag is read between iterations.
  install_for(names, on_stop_signal, SA_RESTART);
}

int stop_signal_received() { return g_stop_signal; }

void record_whole_checkpoint(const std::string& path) {
  if (path.size() >= sizeof g_whole[0]) return;
  const int next = g_whole_current == 0 ? 1 : 0;
  memcpy(g_whole[next], path.c_str(), path.size() + 1);
  g_whole_current = next;
}

void checkpoints_are_rank_zeros() { g_checkpoints_elsewhere = 1; }

std::string whole_checkpoint_clause() {
  const int current = g_whole_current;
  if (g_checkpoints_elsewhere || current < 0) return g_checkpoints_elsewhere ? kCheckpointsElsewhere : kNoCheckpoint;
  return kWholeBefore + std::string(g_whole[current]) + kWholeAfter;
}

void install_startup_stop_signals(const std::vector<std::string>& names) {
  install_for(names, on_startup_stop_signal, 0);
}

namespace {
// The default loop.stop_signals, by number (install_early_stop_signals runs
// before any std::string may be made).
constexpr int kEarlyStopSignals[] = {SIGINT, SIGTERM, SIGUSR1};
}  // namespace

void install_early_stop_signals() {
  for (int signo : kEarlyStopSignals) {
    struct sigaction action {};
    action.sa_handler = on_startup_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(signo, &action, nullptr);
  }
}

void restore_default_stop_signals() {
  for (int signo : kEarlyStopSignals) signal(signo, SIG_DFL);
}

void set_abort_lock_path(const std::string& path) {
  g_abort_lock[0] = '\0';
  if (path.size() >= sizeof g_abort_lock) return;
  memcpy(g_abort_lock, path.c_str(), path.size() + 1);
}

void release_abort_lock() {
  if (g_abort_lock[0] != '\0') unlink(g_abort_lock);
}

void write_thread_stacks(int fd) {
  {
    void* warm[4];
    backtrace(warm, 4);  // loads libgcc's unwinder now: the handler must not allocate
  }
  g_trace_fd = fd;
  const int signo = SIGRTMIN + 4;
  struct sigaction action {};
  action.sa_handler = on_trace_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(signo, &action, nullptr);
  const pid_t pid = ::getpid(), self = static_cast<pid_t>(::syscall(SYS_gettid));
  DIR* tasks = ::opendir("/proc/self/task");
  if (!tasks) return;
  while (const dirent* entry = ::readdir(tasks)) {
    const pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (tid <= 0 || tid == self) continue;
    std::string name;
    if (FILE* comm = std::fopen(("/proc/self/task/" + std::to_string(tid) + "/comm").c_str(), "r")) {
      char buf[64] = {};
      if (std::fgets(buf, sizeof buf, comm)) name = buf;
      std::fclose(comm);
      if (!name.empty() && name.back() == '\n') name.pop_back();
    }
    const std::string header =
        "--- thread " + std::to_string(tid) + " (" + name + ")" + (tid == pid ? ", the main thread" : "") + "\n";
    (void)!::write(fd, header.data(), header.size());
    g_trace_done = 0;
    if (::syscall(SYS_tgkill, pid, tid, signo) != 0) continue;
    for (int i = 0; i < 200 && !g_trace_done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!g_trace_done) {
      const char* missing = "(no answer within 1 s)\n";
      (void)!::write(fd, missing, strlen(missing));
    }
  }
  ::closedir(tasks);
}

std::atomic<bool> g_exit_guarded{false};

void guard_against_exit() {
  g_exit_guarded.store(true);
  std::atexit(on_exit_call);
}

void renew_exit_guard() {
  if (g_exit_guarded.load()) std::atexit(on_exit_call);
}

void allow_exit() { g_exit_allowed.store(true); }

void install_crash_reporter() {
  for (int signo : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    struct sigaction action {};
    action.sa_handler = on_fatal_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(signo, &action, nullptr);
  }
}

}  // namespace trainyard::host
