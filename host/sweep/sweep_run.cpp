#include "sweep/sweep_run.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "report/report.h"
#include "run/experiment_file.h"
#include "trainyard/error.h"
#include "util/files.h"
#include "util/json.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

// Starts `args` with stdout and stderr into `log`; returns the child's pid.
pid_t spawn_logged(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> cargs;
  for (const auto& a : args) cargs.push_back(const_cast<char*>(a.c_str()));
  cargs.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("sweep: cannot start a process: fork failed");
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2), ::close(fd);
    ::execv(cargs[0], cargs.data());
    ::_exit(127);
  }
  return pid;
}

std::string last_error_line(const std::string& log) {
  std::string found;
  for (const auto& line : read_lines(log))
    if (line.rfind("error: ", 0) == 0) found = line.substr(7);
  return found;
}

// A point, validated: its --set list and the epochs a complete run trains.
struct PlannedPoint {
  SweepPoint point;
  std::vector<std::string> sets;
  int64_t total_epochs = 0;
};

std::vector<PlannedPoint> plan(const SweepRequest& request, const Experiment& base, const std::vector<GridAxis>& axes) {
  std::vector<PlannedPoint> planned;
  for (const auto& p : expand_grid(base.name, axes)) {
    PlannedPoint point{p, request.sets, 0};
    for (const auto& kv : p.sets()) point.sets.push_back(kv);
    point.sets.push_back("name=" + p.name);
    try {
      Registry r;
      Experiment e = load_experiment(request.experiment, point.sets, request.plugin_dirs, r);
      if (e.stages.empty()) point.total_epochs = e.loop.epochs;
      for (const auto& st : e.stages) point.total_epochs += st.loop.epochs;
    } catch (const ConfigError& err) {
      throw ConfigError("sweep point " + p.name + ": " + err.what());
    }
    planned.push_back(std::move(point));
  }
  // Parallel runs share the cores unless the experiment says how many threads each takes.
  bool threads_set = false;
  for (const auto& s : request.sets) threads_set = threads_set || s.rfind("distributed.threads_per_process=", 0) == 0;
  if (request.parallel > 1 && !threads_set && base.distributed.threads_per_process == 0)
    for (auto& p : planned)
      p.sets.push_back("distributed.threads_per_process=" +
                       std::to_string(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / request.parallel)));
  return planned;
}

}  // namespace

SweepOutcome run_sweep(const SweepRequest& request) {
  if (request.grid.empty()) throw ConfigError("command line: no --grid", "expected at least one --grid KEY=V1,V2", "e.g. --grid optimizer.lr=0.1,0.01");
  if (request.parallel < 1) throw ConfigError("command line: --parallel " + std::to_string(request.parallel), "expected at least 1", "");
  Registry registry;
  Experiment base = load_experiment(request.experiment, request.sets, request.plugin_dirs, registry);
  std::vector<GridAxis> axes;
  for (const auto& g : request.grid) axes.push_back(parse_grid(g));
  const std::vector<PlannedPoint> points = plan(request, base, axes);
  SweepOutcome outcome;
  outcome.runs = points.size();
  outcome.sweep_dir = (fs::path(request.output_dir.empty() ? base.output.dir : request.output_dir) / (base.name + "-sweep")).string();
  const fs::path dir(outcome.sweep_dir);
  auto log_of = [&](size_t i) { return (dir / "logs" / (points[i].point.name + ".log")).string(); };

  fs::create_directories(dir / "logs");
  std::cout << "sweep: " << points.size() << " runs of " << request.experiment << " in " << outcome.sweep_dir << ", "
            << request.parallel << " at a time\n" << std::flush;
  std::vector<SweepResult> results(points.size());
  size_t finished = 0;
  auto report = [&](size_t i) {
    const auto& r = results[i];
    ++finished;
    std::string tested;
    for (const auto& [k, v] : r.metrics)
      if (k.rfind("test_", 0) == 0) tested += " " + k + "=" + json_number(v);
    std::cout << "sweep: [" << finished << "/" << points.size() << "] " << r.point.name << ": " << r.status
              << (r.error.empty() ? "" : " (" + r.error + ")") << tested << "\n" << std::flush;
    std::vector<SweepResult> done;
    for (const auto& d : results)
      if (!d.status.empty()) done.push_back(d);
    write_file_atomic((dir / "sweep.csv").string(), sweep_csv(axes, done));
    write_file_atomic((dir / "sweep.md").string(), "# Sweep of " + request.experiment + "\n\n" + sweep_markdown(axes, done));
    std::vector<std::pair<std::string, std::string>> runs;  // every run's curves in one chart per value
    for (const auto& d : done) runs.emplace_back(d.point.name, (dir / d.point.name).string());
    write_sweep_report(dir.string(), "Sweep of " + fs::path(request.experiment).filename().string(), runs);
  };
  std::map<pid_t, size_t> running;
  std::map<size_t, std::chrono::steady_clock::time_point> started;
  size_t next = 0;
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  while (next < points.size() || !running.empty()) {
    while (next < points.size() && static_cast<int>(running.size()) < request.parallel) {
      const size_t i = next++;
      results[i].point = points[i].point;
      const std::string run_dir = (dir / points[i].point.name).string();
      if (read_summary(run_dir, points[i].total_epochs, results[i].metrics, results[i].wall_s)) {
        results[i].status = "skipped (finished before)";
        report(i);
        continue;
      }
      std::vector<std::string> args{self, "run", request.experiment, "--output-dir", outcome.sweep_dir};
      for (const auto& s : points[i].sets) args.push_back("--set"), args.push_back(s);
      for (const auto& d : request.plugin_dirs) args.push_back("--plugin-dir"), args.push_back(d);
      running[spawn_logged(args, log_of(i))] = i;
      started[i] = std::chrono::steady_clock::now();
    }
    if (running.empty()) continue;
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) break;
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const size_t i = it->second;
    running.erase(it);
    auto& r = results[i];
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const bool complete = read_summary((dir / points[i].point.name).string(), points[i].total_epochs, r.metrics, r.wall_s);
    if (r.exit_code == 0 && complete) {
      r.status = "finished";
    } else {
      r.status = r.exit_code == 0 ? "incomplete" : "failed";
      r.error = last_error_line(log_of(i));
      if (r.error.empty()) r.error = "exit code " + std::to_string(r.exit_code);
      ++outcome.failures;
    }
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started[i]).count();
    report(i);
  }
  return outcome;
}

}  // namespace trainyard::host
