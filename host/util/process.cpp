#include "util/process.h"

#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
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

volatile sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int signo) {
  if (g_stop_signal != 0 && signo == SIGINT) {
    say("\ntrainyard: second SIGINT: aborting without a checkpoint\n");
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
    return;
  }
  if (g_stop_signal == 0) {
    g_stop_signal = signo;
    say("\ntrainyard: stop signal received: finishing this iteration, writing a checkpoint, then exiting "
        "(resumable); SIGINT again aborts at once\n");
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

void install_stop_signals(const std::vector<std::string>& names) {
  for (const auto& [name, signo] : kStopSignals) {
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // blocking reads and collectives carry on; the flag is read between iterations
    sigaction(signo, &action, nullptr);
  }
}

int stop_signal_received() { return g_stop_signal; }

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
