#include "util/process.h"

#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cstdlib>

#include "config/experiment.h"

namespace trainyard::host {

void tune_allocator() {
  if (std::getenv("GLIBC_TUNABLES") || std::getenv("TRAINYARD_DEFAULT_MALLOC")) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // buffers up to 32 MiB come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and stay there between steps
}

const ComponentConfig*& running_component() {
  static thread_local const ComponentConfig* current = nullptr;
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
  const ComponentConfig* who = running_component();
  if (who && who->component) {
    say(" in ");
    say(kind_name(who->kind));
    say(" '");
    say(who->plugin.c_str());
    say("' (");
    say(who->key.c_str());
    say(") from ");
    say(who->component->library->path.c_str());
  } else {
    say(" outside any component (in the host or LibTorch)");
  }
  say("\n");
  signal(signo, SIG_DFL);
  raise(signo);
}

}  // namespace

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
