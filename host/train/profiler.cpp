#include "train/profiler.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <map>
#include <vector>

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include "log/log.h"
#include "train/hooks.h"
#include "trainyard/error.h"
#include "util/files.h"
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

// The step shares and the top operators, within 80 columns.
std::string summarize(const kineto::ProfilerResult& result, int64_t first, int64_t steps) {
  const auto& events = result.events();
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
  double step_ns = 0;
  for (const auto* s : step_events) {
    step_ns += static_cast<double>(s->durationNs());
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
  std::string out = "iterations " + std::to_string(first + 1) + "-" + std::to_string(first + steps) + ": " +
                    std::to_string(step_events.size()) + " steps recorded\n";
  if (!step_events.empty()) {
    const double n = static_cast<double>(step_events.size());
    double rest = step_ns;
    std::vector<std::string> parts;
    for (size_t k = 0; k < phases.size(); ++k) {
      rest -= phase_ns[k];
      if (phases[k].second == trace_scope::ranks && phase_ns[k] == 0) continue;  // one process: no ranks
      parts.push_back(phases[k].first + " " + fixed(phase_ns[k] / n / 1e6, 2) + " (" +
                      fixed(100 * phase_ns[k] / step_ns, 0) + "%)");
    }
    rest = std::max(0.0, rest);  // clock rounding of ranges at the step's edges
    parts.push_back("trainyard " + fixed(rest / n / 1e6, 2) + " (" + fixed(100 * rest / step_ns, 0) + "%)");
    // One line per 76 columns (the console indents by 2).
    std::string line = "step " + fixed(step_ns / n / 1e6, 2) + " ms:";
    for (size_t k = 0; k < parts.size(); ++k) {
      const std::string item = " " + parts[k] + (k + 1 < parts.size() ? "," : "");
      if (line.size() + item.size() > 76) out += line + "\n", line = "    ";
      line += item;
    }
    out += line + "\n";
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
    const std::string summary = summarize(*result, first_, t.iteration() - first_);
    write_file_atomic(base + ".summary.txt", summary);
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
