#include "train/profiler.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include "log/log.h"
#include "train/hooks.h"
#include "trainyard/error.h"
#include "util/files.h"
#include "util/json.h"
#include "util/text.h"

namespace fs = std::filesystem;
namespace kineto = torch::autograd::profiler;

namespace trainyard::host {

namespace {
// A count of iterations: digits only, at most 12 of them.
bool count(const std::string& text, int64_t& out) {
  if (text.empty() || text.size() > 12 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  out = std::stoll(text);
  return true;
}
}  // namespace

ProfileWindow parse_profile_window(const std::string& text) {
  ProfileWindow w;
  const auto colon = text.find(':');
  int64_t a = 0, b = 0;
  const bool ok =
      colon == std::string::npos ? count(text, b) : count(text.substr(0, colon), a) && count(text.substr(colon + 1), b);
  if (!ok || a < 0 || b <= a)
    throw ConfigError("command line: --profile " + text + ": not a window of train iterations",
                      "expected A:B with 0 <= A < B (skip A iterations, record the next B-A), or B (the first B)",
                      "e.g. --profile 20:30");
  w.skip = a;
  w.steps = b - a;
  return w;
}

namespace {

constexpr const char* kStepPrefix = "ProfilerStep#";  // torch.profiler's step name: TensorBoard's step view reads it

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

struct OpTotals {
  int64_t calls = 0;
  double self_ns = 0, total_ns = 0;
};

struct Interval {
  const kineto::KinetoEvent* event;
  double children_ns = 0;
};

// Self time = an operator's time less that of the operators it called, from
// the nesting of intervals on each thread.
std::map<std::string, OpTotals> operator_totals(const std::vector<kineto::KinetoEvent>& events) {
  std::map<uint64_t, std::vector<const kineto::KinetoEvent*>> by_thread;
  for (const auto& e : events)
    if (e.deviceType() == c10::DeviceType::CPU) by_thread[e.startThreadId()].push_back(&e);
  std::map<std::string, OpTotals> totals;
  for (auto& [thread, list] : by_thread) {
    std::sort(list.begin(), list.end(), [](auto* x, auto* y) {
      return x->startNs() != y->startNs() ? x->startNs() < y->startNs() : x->endNs() > y->endNs();
    });
    std::vector<Interval> open;
    auto close = [&](const Interval& done) {
      const std::string name = done.event->name();
      if (starts_with(name, "trainyard::") || starts_with(name, kStepPrefix)) return;
      OpTotals& t = totals[name];
      ++t.calls;
      t.total_ns += static_cast<double>(done.event->durationNs());
      t.self_ns += static_cast<double>(done.event->durationNs()) - done.children_ns;
    };
    for (const auto* e : list) {
      while (!open.empty() && open.back().event->endNs() <= e->startNs()) close(open.back()), open.pop_back();
      if (!open.empty()) open.back().children_ns += static_cast<double>(e->durationNs());
      open.push_back({e});
    }
    while (!open.empty()) close(open.back()), open.pop_back();
  }
  return totals;
}

std::string fixed(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string pad(const std::string& s, size_t width, bool right) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

// Each step's time split into the loop's phases (exclusive times) and the
// rest ("trainyard").
struct StepSplit {
  size_t steps = 0;
  double step_ns = 0;                                  ///< all recorded steps together
  std::vector<std::pair<std::string, double>> phases;  ///< (phase, ns over all steps), the rest last
};

StepSplit step_split(const std::vector<kineto::KinetoEvent>& events) {
  // CPU ranges only: with CUDA, Kineto also reports each user range as a
  // GPU annotation of the same name on the device's timeline, which counted
  // twice made shares of over 100% and a negative remainder.
  auto on_cpu = [](const kineto::KinetoEvent& e) { return e.deviceType() == c10::DeviceType::CPU; };
  std::vector<const kineto::KinetoEvent*> step_events;
  for (const auto& e : events)
    if (on_cpu(e) && starts_with(e.name(), kStepPrefix)) step_events.push_back(&e);
  const std::vector<std::pair<std::string, const char*>> phases = {{"data wait", trace_scope::data_wait},
                                                                   {"forward", trace_scope::forward},
                                                                   {"backward", trace_scope::backward},
                                                                   {"optimizer", trace_scope::optimizer},
                                                                   {"ranks", trace_scope::ranks}};
  // Each phase's exclusive time: a phase range nested in another (the ranks'
  // agreement inside an optimizer step, say) counts for itself only, so the
  // phases and the remainder add up to the step.
  std::vector<double> phase_ns(phases.size(), 0.0);
  StepSplit split;
  split.steps = step_events.size();
  for (const auto* s : step_events) {
    split.step_ns += static_cast<double>(s->durationNs());
    std::vector<std::pair<const kineto::KinetoEvent*, size_t>> inside;  // (range, its phase)
    for (const auto& e : events)
      if (on_cpu(e) && e.startThreadId() == s->startThreadId() && e.startNs() >= s->startNs() &&
          e.endNs() <= s->endNs())
        for (size_t k = 0; k < phases.size(); ++k)
          if (e.name() == phases[k].second) inside.emplace_back(&e, k);
    std::sort(inside.begin(), inside.end(), [](const auto& x, const auto& y) {
      return x.first->startNs() != y.first->startNs() ? x.first->startNs() < y.first->startNs()
                                                      : x.first->endNs() > y.first->endNs();
    });
    std::vector<std::pair<const kineto::KinetoEvent*, size_t>> open;
    for (const auto& range : inside) {
      while (!open.empty() && open.back().first->endNs() <= range.first->startNs()) open.pop_back();
      const double d = static_cast<double>(range.first->durationNs());
      if (!open.empty()) phase_ns[open.back().second] -= d;  // the enclosing phase's own time excludes it
      phase_ns[range.second] += d;
      open.push_back(range);
    }
  }
  double rest = split.step_ns;
  for (size_t k = 0; k < phases.size(); ++k) {
    rest -= phase_ns[k];
    if (phases[k].second == trace_scope::ranks && phase_ns[k] == 0) continue;  // one process: no ranks
    split.phases.emplace_back(phases[k].first, phase_ns[k]);
  }
  split.phases.emplace_back("trainyard", std::max(0.0, rest));  // clock rounding of ranges at the step's edges
  return split;
}

// The host's waits for the device and the kernels it launched, over the whole
// window (every thread: on CUDA the backward runs on the autograd engine's).
struct Waits {
  std::map<std::string, int64_t> host_syncs;  ///< by name, over all recorded steps
  int64_t kernel_launches = 0;
  int64_t host_syncs_total() const {
    int64_t n = 0;
    for (const auto& [name, calls] : host_syncs) n += calls;
    return n;
  }
};

// A CUDA runtime or driver call's name without the suffix some CUPTI versions
// give it ("cudaLaunchKernel_v7000", "cudaMemcpy_ptds" -> its plain name).
std::string api_name(const std::string& name) {
  if (!starts_with(name, "cu")) return name;
  return name.substr(0, name.find('_'));
}

constexpr const char* kItem = "aten::_local_scalar_dense";  // every .item() (and a Scalar read), on any device

Waits count_waits(const std::vector<kineto::KinetoEvent>& events) {
  static const std::set<std::string> syncs = {
      kItem,        "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
      "cudaMemcpy", "cuStreamSynchronize",   "cuCtxSynchronize",      "cuEventSynchronize",
      "cuMemcpy",   "cuMemcpyDtoH",          "cuMemcpyHtoD",          "cuMemcpyDtoD"};
  static const std::set<std::string> launches = {
      "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
      "cuLaunchKernel",   "cuLaunchKernelEx",    "cudaGraphLaunch"};
  // A call inside another counted one is part of it, counted once: an
  // .item() on CUDA copies and waits for its stream (cudaStreamSynchronize
  // within aten::_local_scalar_dense), a runtime launch may show its driver
  // launch. Nesting by time: the CUDA runtime's events carry the system's
  // thread id and the operators the profiler's own, and the thread that
  // waits does nothing else meanwhile.
  struct Call {
    uint64_t start, end;
    std::string name;
    bool sync;
  };
  std::vector<Call> calls;
  for (const auto& e : events) {
    if (e.deviceType() != c10::DeviceType::CPU) continue;  // host calls only, not the device's own records
    std::string name = api_name(e.name());
    const bool sync = syncs.count(name) > 0;
    if (sync || launches.count(name)) calls.push_back({e.startNs(), e.endNs(), std::move(name), sync});
  }
  std::sort(calls.begin(), calls.end(),
            [](const Call& x, const Call& y) { return x.start != y.start ? x.start < y.start : x.end > y.end; });
  // CUPTI's timestamps (the runtime's calls) are converted to the profiler's
  // clock: a wait inside an .item() may end a little after it. Within this
  // much it still counts as inside.
  constexpr uint64_t kClockSkewNs = 10000;
  Waits waits;
  uint64_t sync_until = 0, launch_until = 0;  // the end of the last counted call of each kind
  bool any_sync = false, any_launch = false;
  for (const Call& c : calls) {
    bool& any = c.sync ? any_sync : any_launch;
    uint64_t& until = c.sync ? sync_until : launch_until;
    if (any && c.end <= until + kClockSkewNs) continue;  // inside the last one counted
    any = true;
    until = c.end;
    if (c.sync)
      ++waits.host_syncs[c.name];
    else
      ++waits.kernel_launches;
  }
  return waits;
}

// A count per step: whole as an integer, else to two decimals ("1", "1.4", "0.33").
std::string per_step(double total, size_t steps) {
  const double v = steps ? total / static_cast<double>(steps) : 0.0;
  if (v == std::floor(v)) return json_number(v);
  std::string text = fixed(v, 2);
  while (text.back() == '0') text.pop_back();
  return text;
}

// The step shares, the waits and the top operators, within 80 columns.
std::string summarize(const kineto::ProfilerResult& result, int64_t first, int64_t steps, const StepSplit& split,
                      const Waits& waits) {
  const auto& events = result.events();
  std::string out = "iterations " + std::to_string(first + 1) + "-" + std::to_string(first + steps) + ": " +
                    std::to_string(split.steps) + " steps recorded\n";
  // One line per 76 columns (the console indents by 2).
  auto wrap = [&](std::string line, const std::vector<std::string>& parts) {
    for (size_t k = 0; k < parts.size(); ++k) {
      const std::string item = " " + parts[k] + (k + 1 < parts.size() ? "," : "");
      if (line.size() + item.size() > 76) out += line + "\n", line = "    ";
      line += item;
    }
    out += line + "\n";
  };
  if (split.steps > 0) {
    const double n = static_cast<double>(split.steps);
    std::vector<std::string> parts;
    for (const auto& [phase, ns] : split.phases)
      parts.push_back(phase + " " + fixed(ns / n / 1e6, 2) + " (" + fixed(100 * ns / split.step_ns, 0) + "%)");
    wrap("step " + fixed(split.step_ns / n / 1e6, 2) + " ms:", parts);
    std::vector<std::string> syncs;
    for (const auto& [name, calls] : waits.host_syncs) syncs.push_back(name + " " + per_step(calls, split.steps));
    std::string head = "per step: " + per_step(waits.host_syncs_total(), split.steps) + " host syncs";
    if (syncs.empty())
      wrap(head + ",", {per_step(waits.kernel_launches, split.steps) + " kernel launches"});
    else {
      syncs.front() = "(" + syncs.front();
      syncs.back() += ")";
      syncs.push_back(per_step(waits.kernel_launches, split.steps) + " kernel launches");
      wrap(head, syncs);
    }
  }
  auto table = [&](const std::map<std::string, OpTotals>& totals, const std::string& title) {
    std::vector<std::pair<std::string, OpTotals>> rows(totals.begin(), totals.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.self_ns > b.second.self_ns; });
    double all = 0;
    for (const auto& r : rows) all += r.second.self_ns;
    out += pad(title, 42, false) + pad("calls", 7, true) + pad("self ms", 10, true) + pad("self %", 8, true) +
           pad("total ms", 10, true) + "\n";
    for (size_t i = 0; i < rows.size() && i < 15; ++i) {
      std::string name = rows[i].first;
      if (name.size() > 41) name = name.substr(0, 38) + "...";
      const OpTotals& t = rows[i].second;
      out += pad(name, 42, false) + pad(std::to_string(t.calls), 7, true) + pad(fixed(t.self_ns / 1e6, 3), 10, true) +
             pad(fixed(all > 0 ? 100 * t.self_ns / all : 0, 1), 8, true) + pad(fixed(t.total_ns / 1e6, 3), 10, true) +
             "\n";
    }
  };
  table(operator_totals(events), "operator (CPU)");
  // Device kernels (on a GPU): their time on the device, by kernel name.
  std::map<std::string, OpTotals> kernels;
  for (const auto& e : events)
    if (e.deviceType() != c10::DeviceType::CPU) {
      OpTotals& t = kernels[e.name()];
      ++t.calls;
      t.self_ns += static_cast<double>(e.durationNs());
      t.total_ns += static_cast<double>(e.durationNs());
    }
  if (!kernels.empty()) table(kernels, "kernel (device)");
  return out;
}

// The counts and the split as JSON (rankR.profile_summary.json), for scripts.
nlohmann::ordered_json summary_json(int64_t first, int64_t steps, const StepSplit& split, const Waits& waits) {
  const double n = split.steps ? static_cast<double>(split.steps) : 1.0;
  nlohmann::ordered_json j;
  j["iterations"] = {first + 1, first + steps};
  j["steps"] = split.steps;
  j["host_syncs_per_step"] = json_value(waits.host_syncs_total() / n);
  nlohmann::ordered_json by_name = nlohmann::ordered_json::object();
  for (const auto& [name, calls] : waits.host_syncs) by_name[name] = json_value(calls / n);
  j["host_syncs_by_name"] = by_name;  // per step
  j["kernel_launches_per_step"] = json_value(waits.kernel_launches / n);
  auto ms = [&](double ns) { return json_value(std::round(ns / n / 1e3) / 1e3); };  // per step, to the microsecond
  j["step_ms"] = ms(split.step_ns);
  nlohmann::ordered_json phases = nlohmann::ordered_json::object();
  for (const auto& [phase, ns] : split.phases) phases[phase] = ms(ns);
  j["step_split_ms"] = phases;  // per step; the phases add up to step_ms
  return j;
}

class StepProfiler final : public HostHook {
 public:
  StepProfiler(ProfileWindow window, std::string dir) : window_(window), dir_(std::move(dir)) {}
  ~StepProfiler() override {
    if (recording_) kineto::disableProfiler();
  }
  std::string name() const override { return "profiler (--profile)"; }

  void before_run(LoopState& t) override {
    if (!done_ && !recording_ && seen_ == window_.skip) start(t);
  }
  void after_train_iter(LoopState& t, const StepResult&) override {
    ++seen_;
    if (recording_) {
      step_.reset();  // ends this step's range
      if (seen_ == window_.skip + window_.steps) return stop(t, "");
      open_step(t);
    } else if (!done_ && seen_ == window_.skip) {
      start(t);
    }
  }
  void after_run(LoopState& t) override {
    if (recording_) stop(t, " (the run ended first)");
  }

 private:
  void start(LoopState& t) {
    std::set<torch::profiler::impl::ActivityType> activities{torch::profiler::impl::ActivityType::CPU};
    if (t.context().device.is_cuda()) activities.insert(torch::profiler::impl::ActivityType::CUDA);
    const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO,
                                                       /*report_input_shapes=*/true);
    kineto::prepareProfiler(config, activities);
    kineto::enableProfiler(config, activities);
    recording_ = true;
    first_ = t.iteration();
    open_step(t);
  }
  void open_step(LoopState& t) {
    step_ = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
    if (step_->isActive()) step_->before(std::string(kStepPrefix) + std::to_string(t.iteration() + 1));
  }
  void stop(LoopState& t, const std::string& note) {
    step_.reset();
    std::unique_ptr<kineto::ProfilerResult> result = kineto::disableProfiler();
    recording_ = false;
    done_ = true;
    fs::create_directories(dir_);
    const std::string base = (fs::path(dir_) / ("rank" + std::to_string(t.context().rank))).string();
    const std::string trace = base + ".pt.trace.json";
    // Kineto writes the file itself: a temporary name renamed into place keeps it whole.
    const std::string partial = trace + ".tmp-" + std::to_string(::getpid());
    result->save(partial);
    fs::rename(partial, trace);
    const StepSplit steps = step_split(result->events());
    const Waits waits = count_waits(result->events());
    const std::string summary = summarize(*result, first_, t.iteration() - first_, steps, waits);
    write_file_atomic(base + ".summary.txt", summary);
    write_file_atomic(base + ".profile_summary.json",
                      json_text(summary_json(first_, t.iteration() - first_, steps, waits), true) + "\n");
    if (t.writes_files()) {
      std::string indented;
      for (const auto& line : split(summary, '\n'))
        if (!line.empty()) indented += "  " + line + "\n";
      InfoLine() << "trainyard: profile" << note << " in " << trace << "\n" << indented;
    }
  }

  ProfileWindow window_;
  std::string dir_;
  int64_t seen_ = 0;  ///< train iterations this process ran (every stage)
  int64_t first_ = 0;
  bool recording_ = false, done_ = false;
  std::unique_ptr<at::RecordFunction> step_;
};

}  // namespace

std::shared_ptr<HostHook> profiler_hook(ProfileWindow window, std::string dir) {
  return std::make_shared<StepProfiler>(window, std::move(dir));
}

}  // namespace trainyard::host
