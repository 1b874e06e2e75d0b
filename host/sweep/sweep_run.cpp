#include "sweep/sweep_run.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "formats/metrics.h"
#include "formats/run_paths.h"
#include "report/report.h"
#include "run/experiment_file.h"
#include "run/runner.h"
#include "sweep/halving.h"
#include "sweep/space.h"
#include "trainyard/error.h"
#include "util/files.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

// Starts `args` with stdout and stderr into `log`; returns the child's pid.
pid_t spawn_logged(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> cargs;
  for (const auto& a : args) cargs.push_back(const_cast<char*>(a.c_str()));
  cargs.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("sweep: cannot start a process: fork failed");
  if (pid == 0) {
    // A sweep killed (even with SIGKILL) stops its runs as a stop signal does:
    // at the next iteration, with a checkpoint, so that the sweep run again resumes them.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(4);
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

std::vector<PlannedPoint> plan(const SweepRequest& request, const Experiment& base,
                               const std::vector<SweepPoint>& points) {
  std::vector<PlannedPoint> planned;
  for (const auto& p : points) {
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
      p.sets.push_back(
          "distributed.threads_per_process=" +
          std::to_string(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / request.parallel)));
  return planned;
}

// The points of a grid or of a search space, and the keys they vary.
std::vector<SweepPoint> points_of(const SweepRequest& request, const Experiment& base, std::vector<std::string>& keys) {
  if (!request.grid.empty() && !request.space.empty())
    throw ConfigError("command line: --grid and --space together", "expected one of them",
                      "draw from a list with --space 'KEY=choice(V1,V2)'");
  if (request.grid.empty() && request.space.empty())
    throw ConfigError("command line: no --grid or --space",
                      "expected --grid KEY=V1,V2 or --space KEY=DIST(...) --trials N",
                      "e.g. --grid optimizer.lr=0.1,0.01");
  if (!request.space.empty() && request.trials < 1)
    throw ConfigError("command line: --space without --trials", "expected --trials N, the number of points to draw",
                      "");
  if (request.space.empty() && request.trials > 0)
    throw ConfigError("command line: --trials without --space", "expected --space KEY=DIST(...) to draw from", "");
  // A key named twice would be set twice per point, the second value winning.
  auto once = [&keys](const std::string& flag, const std::string& key) {
    if (std::find(keys.begin(), keys.end(), key) != keys.end())
      throw ConfigError("command line: " + flag + " " + key + " given twice",
                        "expected each key once (its values in one " + flag + ")",
                        flag == "--grid" ? "list every value after one =, e.g. --grid optimizer.lr=0.1,0.01"
                                         : "keep one distribution for it");
    keys.push_back(key);
  };
  if (!request.grid.empty()) {
    std::vector<GridAxis> axes;
    for (const auto& g : request.grid) axes.push_back(parse_grid(g)), once("--grid", axes.back().key);
    return expand_grid(base.name, axes);
  }
  std::vector<SpaceAxis> axes;
  for (const auto& s : request.space) axes.push_back(parse_space(s)), once("--space", axes.back().key);
  return sample_space(base.name, axes, request.trials, request.seed);
}

// The value runs are ranked by: --metric, else stopping.monitor; its direction as stopping's mode says.
Ranking ranking_of(const SweepRequest& request, const Experiment& base) {
  Ranking r;
  r.metric = request.metric.empty() ? base.stopping.monitor : request.metric;
  StoppingConfig direction = base.stopping;  // its mode speaks for its monitor only
  if (r.metric != base.stopping.monitor) direction.mode = "auto";
  r.maximize = !direction.minimizes(r.metric);
  return r;
}

// The ranking value is checked before any trial trains, against what a
// trial reports: successive halving reads a test event's value at each rung,
// a sweep's table the last values of summary.json (the meters' train_ and
// test_ values). A name the run logs elsewhere (lr) would train every trial
// and then rank nothing.
void check_ranking_metric(const SweepRequest& request, const Experiment& base, const Registry& registry,
                          const Ranking& ranking) {
  const std::string where =
      request.metric.empty() ? base.where("stopping.monitor") : "command line: --metric " + ranking.metric;
  if (request.halving && !base.test_data.component)
    throw ConfigError(where + ": --halving ranks trials by a test value at each rung, and " + request.experiment +
                          " has no dataset.test",
                      "expected an experiment with a test split",
                      "add dataset.test: {plugin: ...}, or sweep without --halving");
  std::vector<std::string> reported;
  for (const auto& name : Runner(base, registry).value_names())
    if (name.rfind("test_", 0) == 0 || (!request.halving && name.rfind("train_", 0) == 0)) reported.push_back(name);
  if (std::binary_search(reported.begin(), reported.end(), ranking.metric)) return;
  const std::string hint = did_you_mean(ranking.metric, reported);
  throw ConfigError(where + ": no value '" + ranking.metric + "' in what a trial reports" +
                        (request.halving ? " at a rung (its test values)" : " (its summary.json)"),
                    "expected one of " + join(reported),
                    !hint.empty()      ? hint
                    : reported.empty() ? ""
                                       : "e.g. --metric " + reported.front());
}

// The value of `metric` in the test event at the end of epoch `epoch`, from a run's metrics.jsonl.
std::optional<double> value_at_epoch(const std::string& run_dir, const std::string& metric, int64_t epoch) {
  std::optional<double> found;
  for (const auto& e : read_events(RunPaths(run_dir).metrics))
    if (e.phase == "test" && e.epoch == epoch && e.values.count(metric)) found = e.values.at(metric);
  return found;
}

}  // namespace

SweepOutcome run_sweep(const SweepRequest& request) {
  if (request.parallel < 1)
    throw ConfigError("command line: --parallel " + std::to_string(request.parallel), "expected at least 1", "");
  Registry registry;
  Experiment base = load_experiment(request.experiment, request.sets, request.plugin_dirs, registry);
  std::vector<std::string> keys;
  const std::vector<PlannedPoint> points = plan(request, base, points_of(request, base, keys));
  const Ranking ranking = ranking_of(request, base);
  if (!ranking.metric.empty()) check_ranking_metric(request, base, registry, ranking);
  std::unique_ptr<Halving> halving;
  if (request.halving) {
    if (ranking.metric.empty())
      throw ConfigError("command line: --halving: no value to rank trials by",
                        "expected --metric NAME or stopping.monitor in the experiment",
                        "e.g. --metric test_accuracy_top1");
    if (!base.stages.empty())
      throw ConfigError(
          "command line: --halving with stages:", "expected a one-stage experiment (rungs count its epochs)", "");
    if (request.reduction < 2)
      throw ConfigError("command line: --reduction " + std::to_string(request.reduction), "expected 2 or more", "");
    if (request.min_epochs < 1 || request.min_epochs >= base.loop.epochs)
      throw ConfigError("command line: --min-epochs " + std::to_string(request.min_epochs),
                        "expected 1 to loop.epochs - 1 (" + std::to_string(base.loop.epochs - 1) + ")",
                        "raise loop.epochs, or sweep without --halving");
    for (const auto& p : points)
      if (p.total_epochs != base.loop.epochs)
        throw ConfigError("sweep point " + p.point.name + ": --halving with loop.epochs varied",
                          "expected every trial to train loop.epochs " + std::to_string(base.loop.epochs), "");
    // Trials start in an order drawn from --seed: a grid lists its values sorted.
    halving = std::make_unique<Halving>(request.min_epochs, base.loop.epochs, request.reduction, ranking.maximize,
                                        points.size(), seeded_order(points.size(), request.seed));
  }
  SweepOutcome outcome;
  outcome.runs = points.size();
  outcome.sweep_dir =
      (fs::path(request.output_dir.empty() ? base.output.dir : request.output_dir) / (base.name + "-sweep")).string();
  const fs::path dir(outcome.sweep_dir);
  auto log_of = [&](size_t i) { return (dir / "logs" / (points[i].point.name + ".log")).string(); };
  auto run_dir_of = [&](size_t i) { return (dir / points[i].point.name).string(); };

  fs::create_directories(dir / "logs");
  std::cout << "sweep: " << points.size() << " runs of " << request.experiment << " in " << outcome.sweep_dir << ", "
            << request.parallel << " at a time";
  if (halving) {
    std::cout << "; successive halving by " << ranking.metric << " (" << (ranking.maximize ? "max" : "min")
              << "), rungs at epochs";
    for (int64_t r : halving->rungs()) std::cout << " " << r;
  }
  std::cout << "\n" << std::flush;
  std::vector<SweepResult> results(points.size());
  for (size_t i = 0; i < points.size(); ++i) results[i].point = points[i].point;
  // What each run directory already holds (a sweep run again, or resumed after a kill).
  auto look = [&](size_t i) {
    SweepResult& r = results[i];
    const auto summary = read_summary(RunPaths(run_dir_of(i)).summary);
    if (!summary) return false;
    r.metrics = summary->metrics;
    r.epochs = summary->epochs_completed;
    return summary->epochs_completed >= points[i].total_epochs || summary->stopped_by_criterion();
  };
  size_t reported = 0;
  auto report = [&](size_t i) {
    const auto& r = results[i];
    ++reported;
    std::string tested;
    for (const auto& [k, v] : r.metrics)
      if (k.rfind("test_", 0) == 0) tested += " " + k + "=" + table_number(v);
    std::cout << "sweep: [" << reported << "] " << r.point.name << ": " << r.status
              << (r.error.empty() ? "" : " (" + r.error + ")") << tested << "\n"
              << std::flush;
    std::vector<SweepResult> done;
    for (const auto& d : results)
      if (!d.status.empty()) done.push_back(d);
    done = ranked(done, ranking);
    write_file_atomic((dir / "sweep.csv").string(), sweep_csv(keys, done));
    write_file_atomic((dir / "sweep.md").string(),
                      "# Sweep of " + request.experiment + "\n\n" + sweep_markdown(keys, done));
    std::vector<std::pair<std::string, std::string>> runs;  // every run's curves in one chart per value, best first
    for (const auto& d : done) runs.emplace_back(d.point.name, (dir / d.point.name).string());
    write_sweep_report(dir.string(), "Sweep of " + fs::path(request.experiment).filename().string(), runs);
    if (!done.empty() && done.front().rank == 1) outcome.best = done.front().point.name;
  };

  // The jobs: each point to the end, or to the rung successive halving gives it.
  struct Job {
    size_t point;
    size_t rung = 0;
    int64_t until = 0;  ///< --until-epoch; 0 to the end
  };
  std::deque<Job> queued;  ///< without halving: every unfinished point; with it: trials a kill interrupted
  if (halving) {
    // The scheduler's state, read back from the run directories: rungs completed, and where runs were headed.
    for (size_t i = 0; i < points.size(); ++i) {
      look(i);
      const int64_t done = results[i].epochs;
      size_t k = 0;
      for (; k < halving->rungs().size() && halving->rungs()[k] <= done; ++k) {
        const auto v = value_at_epoch(run_dir_of(i), ranking.metric, halving->rungs()[k]);
        if (!v) break;
        halving->completed(i, k, *v);
      }
      // Stopped between rungs (or in the first): it was headed for rung k and goes on there first.
      if (fs::exists(run_dir_of(i)) && k < halving->rungs().size() && (k == 0 || done > halving->rungs()[k - 1])) {
        halving->restore_started(i, k);
        const int64_t until = halving->rungs()[k];
        queued.push_back({i, k, until < base.loop.epochs ? until : 0});
      }
    }
  } else {
    for (size_t i = 0; i < points.size(); ++i) {
      if (look(i)) {
        results[i].status = "skipped (finished before)";
        report(i);
      } else {
        queued.push_back({i});
      }
    }
  }
  std::map<pid_t, Job> running;
  std::map<pid_t, std::chrono::steady_clock::time_point> started;
  // Process slots: on GPUs, slot k's runs take GPUs first_gpu_id + k x num_gpus onwards.
  std::map<pid_t, int> slot_of;
  std::vector<bool> slot_busy(static_cast<size_t>(request.parallel), false);
  std::vector<int64_t> epochs_before(points.size(), 0);
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  auto next_job = [&]() -> std::optional<Job> {
    if (!queued.empty()) {
      Job j = queued.front();
      queued.pop_front();
      return j;
    }
    if (!halving) return std::nullopt;
    const auto h = halving->next();
    if (!h) return std::nullopt;
    const int64_t until = halving->rungs()[h->rung];
    return Job{h->trial, h->rung, until < base.loop.epochs ? until : 0};
  };
  while (true) {
    while (static_cast<int>(running.size()) < request.parallel) {
      const auto job = next_job();
      if (!job) break;
      const size_t i = job->point;
      look(i);
      epochs_before[i] = results[i].epochs;
      std::vector<std::string> args{self, "run", request.experiment, "--output-dir", outcome.sweep_dir};
      for (const auto& s : points[i].sets) args.push_back("--set"), args.push_back(s);
      for (const auto& d : request.plugin_dirs) args.push_back("--plugin-dir"), args.push_back(d);
      if (job->until > 0) args.push_back("--until-epoch"), args.push_back(std::to_string(job->until));
      const int slot = static_cast<int>(std::find(slot_busy.begin(), slot_busy.end(), false) - slot_busy.begin());
      if (base.distributed.num_gpus > 0)
        args.push_back("--set"),
            args.push_back("distributed.first_gpu_id=" +
                           std::to_string(base.distributed.first_gpu_id + slot * base.distributed.num_gpus));
      const pid_t pid = spawn_logged(args, log_of(i));
      slot_busy[static_cast<size_t>(slot)] = true;
      slot_of[pid] = slot;
      running[pid] = *job;
      started[pid] = std::chrono::steady_clock::now();
    }
    if (running.empty()) break;
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) break;
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const Job job = it->second;
    running.erase(it);
    slot_busy[static_cast<size_t>(slot_of[pid])] = false;
    const size_t i = job.point;
    auto& r = results[i];
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - started[pid]).count();
    r.error.clear();
    const bool complete = look(i);
    outcome.epochs_trained += r.epochs - epochs_before[i];
    const int64_t target = job.until > 0 ? job.until : points[i].total_epochs;
    if (r.exit_code == 0 && (complete || r.epochs >= target)) {
      if (halving) {
        const auto v =
            r.metrics.count(ranking.metric) ? std::optional<double>(r.metrics.at(ranking.metric)) : std::nullopt;
        if (!v) {
          r.status = "failed";
          r.error = "no value of " + ranking.metric + " in its summary.json";
          halving->failed(i);
          ++outcome.failures;
        } else {
          halving->completed(i, complete ? halving->rungs().size() - 1 : job.rung, *v);
          r.status = complete ? "finished" : "stopped at " + std::to_string(r.epochs) + " epochs";
        }
      } else {
        r.status = "finished";
      }
    } else {
      r.status = r.exit_code == 0 ? "incomplete" : "failed";
      r.error = last_error_line(log_of(i));
      if (r.error.empty()) r.error = "exit code " + std::to_string(r.exit_code);
      if (halving) halving->failed(i);
      ++outcome.failures;
    }
    report(i);
  }
  // Trials a restored halving state did not run again still belong in the table.
  if (halving)
    for (size_t i = 0; i < points.size(); ++i) {
      if (!results[i].status.empty()) continue;
      const bool complete = look(i);
      if (results[i].epochs == 0) continue;
      results[i].status = complete ? "finished" : "stopped at " + std::to_string(results[i].epochs) + " epochs";
      report(i);
    }
  return outcome;
}

}  // namespace trainyard::host
