#include "distributed/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include <boost/dll/runtime_symbol_info.hpp>

#include "trainyard/error.h"
#include "util/process.h"

namespace trainyard::host {
namespace {

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw Error(std::string("launcher: cannot find a free port: ") + std::strerror(errno));
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  int out = -1, err = -1;
  std::string out_buffer, err_buffer;
  bool done = false;
  int status = 0;
};

// Writes complete lines of `buffer` with the rank prefix.
void forward(std::string& buffer, FILE* to, int rank, bool flush_all) {
  size_t start = 0, nl;
  while ((nl = buffer.find('\n', start)) != std::string::npos) {
    std::fprintf(to, "[rank %d] %.*s\n", rank, static_cast<int>(nl - start), buffer.data() + start);
    start = nl + 1;
  }
  buffer.erase(0, start);
  if (flush_all && !buffer.empty()) {
    std::fprintf(to, "[rank %d] %s\n", rank, buffer.c_str());
    buffer.clear();
  }
  std::fflush(to);
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return std::string("was killed by ") +
           (name ? std::string("SIG") + name : "signal " + std::to_string(WTERMSIG(status)));
  }
  return "ended";
}

}  // namespace

namespace {
volatile sig_atomic_t g_launcher_signal = 0;
void on_launcher_signal(int signo) { g_launcher_signal = signo; }
}  // namespace

int launch_workers(const LaunchOptions& o, const std::vector<std::string>& worker_args) {
  // A stop signal to the launcher goes on to every worker (as SIGTERM, once):
  // they checkpoint the same iteration and exit resumable. From a terminal
  // the workers get Ctrl-C themselves too; one more SIGTERM changes nothing.
  for (int signo : {SIGINT, SIGTERM, SIGUSR1}) {
    struct sigaction action {};
    action.sa_handler = on_launcher_signal;
    sigemptyset(&action.sa_mask);
    sigaction(signo, &action, nullptr);
  }
  bool forwarded = false;
  const int world = o.nproc_per_node * o.nnodes;
  const int port = o.master_port > 0 ? o.master_port : (o.nnodes == 1 ? free_port() : 29500);
  const std::string exe = boost::dll::program_location().string();
  std::vector<Worker> workers(static_cast<size_t>(o.nproc_per_node));
  for (int local = 0; local < o.nproc_per_node; ++local) {
    Worker& w = workers[static_cast<size_t>(local)];
    w.rank = o.node_rank * o.nproc_per_node + local;
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      throw Error(std::string("launcher: pipe: ") + std::strerror(errno));
    w.pid = ::fork();
    if (w.pid < 0) throw Error(std::string("launcher: fork: ") + std::strerror(errno));
    if (w.pid == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      ::setenv("RANK", std::to_string(w.rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node).c_str(), 1);
      ::setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("TRAINYARD_LAUNCHER", "1", 1);
      std::vector<char*> args;
      args.push_back(const_cast<char*>(exe.c_str()));
      for (const auto& a : worker_args) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(exe.c_str(), args.data());
      std::fprintf(stderr, "error: launcher: cannot start %s: %s\n", exe.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    w.out = out[0];
    w.err = err[0];
  }
  std::fprintf(stderr, "trainyard: launched ranks %d..%d of %d (master %s:%d)\n", o.node_rank * o.nproc_per_node,
               o.node_rank * o.nproc_per_node + o.nproc_per_node - 1, world, o.master_addr.c_str(), port);

  int exit_code = 0;
  std::string failure;
  auto stop_others = [&](const Worker& failed) {
    failure = "rank " + std::to_string(failed.rank) + " (pid " + std::to_string(failed.pid) + ") " +
              describe(failed.status) + "; stopping the other ranks";
    std::fprintf(stderr, "error: %s\n", failure.c_str());
    for (auto& w : workers)
      if (!w.done) ::kill(w.pid, SIGTERM);
  };
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (true) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Worker*, bool>> owners;  // worker, is stderr
    for (auto& w : workers) {
      if (w.out >= 0) fds.push_back({w.out, POLLIN, 0}), owners.push_back({&w, false});
      if (w.err >= 0) fds.push_back({w.err, POLLIN, 0}), owners.push_back({&w, true});
    }
    if (!fds.empty()) ::poll(fds.data(), fds.size(), 100);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [w, is_err] = owners[i];
      char buf[65536];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      std::string& buffer = is_err ? w->err_buffer : w->out_buffer;
      if (n > 0) {
        buffer.append(buf, static_cast<size_t>(n));
        forward(buffer, is_err ? stderr : stdout, w->rank, false);
      } else {
        forward(buffer, is_err ? stderr : stdout, w->rank, true);
        ::close(fds[i].fd);
        (is_err ? w->err : w->out) = -1;
      }
    }
    if (g_launcher_signal != 0 && !forwarded) {
      forwarded = true;
      for (auto& w : workers)
        if (!w.done) ::kill(w.pid, SIGTERM);
    }
    bool all_done = true;
    for (auto& w : workers) {
      if (!w.done && ::waitpid(w.pid, &w.status, WNOHANG) == w.pid) {
        w.done = true;
        // Stopped by a signal after the checkpoint: the others are doing the same.
        if (WIFEXITED(w.status) && WEXITSTATUS(w.status) == kExitStoppedResumable) {
          if (exit_code == 0) exit_code = kExitStoppedResumable;
          continue;
        }
        const bool ok = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
        if (!ok && failure.empty()) {
          exit_code = WIFEXITED(w.status) ? WEXITSTATUS(w.status) : 1;
          stop_others(w);
          deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        }
      }
      all_done = all_done && w.done;
    }
    if (all_done && fds.empty()) break;
    if (std::chrono::steady_clock::now() > deadline)  // SIGTERM ignored: no more waiting
      for (auto& w : workers)
        if (!w.done) ::kill(w.pid, SIGKILL);
  }
  return exit_code;
}

}  // namespace trainyard::host
