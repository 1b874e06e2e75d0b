#include "run/lr_finder.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <sstream>

#include "distributed/communicator.h"
#include "run/assembly.h"
#include "run/runner.h"
#include "run/session.h"
#include "train/epoch_loop.h"
#include "trainyard/error.h"
#include "util/files.h"
#include "util/json.h"
#include "util/text.h"

namespace trainyard::host {
namespace {

// Everything a finder run changes: weights, batch norm statistics, optimizer
// state (momentum, Adam moments), and the random generator (dropout).
class Snapshot {
 public:
  explicit Snapshot(EpochLoop& t) : t_(t) {
    at::NoGradGuard no_grad;
    for (const auto& p : t.network().parameters()) params_.push_back(p.detach().clone());
    for (const auto& b : t.network().buffers()) buffers_.push_back(b.detach().clone());
    torch::serialize::OutputArchive archive;
    t.optimizer().save(archive);
    std::ostringstream out;
    archive.save_to(out);
    optimizer_ = out.str();
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    rng_ = gen.get_state();
  }

  void restore() {
    at::NoGradGuard no_grad;
    auto params = t_.network().parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].copy_(params_[i]);
      params[i].mutable_grad() = at::Tensor();
    }
    auto buffers = t_.network().buffers();
    for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(buffers_[i]);
    t_.optimizer().state().clear();
    std::istringstream in(optimizer_);
    torch::serialize::InputArchive archive;
    archive.load_from(in);
    t_.optimizer().load(archive);
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng_);
  }

 private:
  EpochLoop& t_;
  std::vector<at::Tensor> params_, buffers_;
  std::string optimizer_;
  at::Tensor rng_;
};

// Optimizer updates at a given rate on the training batches, from the start
// of epoch 0 (every restart sees the same data).
class Updates {
 public:
  Updates(EpochLoop& t, Communicator* comm) : t_(t), comm_(comm) { rewind(); }
  void rewind() {
    epoch_ = 0;
    stream_ = t_.stages().train_batches(0);
  }
  /// One optimizer update (iter_size batches) at `lr`; its loss, averaged over ranks.
  double update(double lr) {
    t_.set_fixed_lr(lr);
    double sum = 0;
    for (int64_t k = 0; k < t_.iter_size(); ++k) sum += t_.stages().train_step(next()).loss.item<double>();
    double loss = sum / static_cast<double>(t_.iter_size());
    if (comm_) loss = comm_->sum({loss})[0] / comm_->size();
    return loss;
  }

 private:
  Batch next() {
    std::optional<Batch> batch = stream_();
    if (!batch) {
      stream_ = t_.stages().train_batches(++epoch_);
      batch = stream_();
      if (!batch) throw Error("find-lr: the training set gives no batches");
    }
    return std::move(*batch);
  }
  EpochLoop& t_;
  Communicator* comm_;
  BatchStream stream_;
  int64_t epoch_ = 0;
};

double log_spaced(double lo, double hi, int64_t i, int64_t n) {
  if (n <= 1 || i == 0) return lo;
  if (i == n - 1) return hi;  // the ends exactly as given
  // In decades, so that a decade boundary comes out exact (1e-3, not 0.0010000000000000002).
  const double a = std::log10(lo), b = std::log10(hi);
  return std::pow(10.0, a + (b - a) * double(i) / double(n - 1));
}

std::string lr_text(double lr) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", lr);
  return buf;
}

}  // namespace

LrFinderResult find_learning_rate(EpochLoop& t, Communicator* comm, const LrFinderOptions& o, bool print) {
  // The command checks its options for the user; these are the finder's own preconditions.
  if (!(o.min_lr > 0) || !(o.max_lr > o.min_lr) || o.num_runs < 3 || o.iters_per_run < 1 || o.iters < 5)
    throw Error("lr finder: expected 0 < min_lr < max_lr, num_runs >= 3, iters_per_run >= 1, iters >= 5");
  LrFinderResult result;
  Snapshot initial(t);
  Updates updates(t, comm);
  if (o.mode == "restart") {
    const int64_t tail = std::max<int64_t>(1, (o.iters_per_run + 3) / 4);
    double best = std::numeric_limits<double>::infinity();
    for (int64_t r = 0; r < o.num_runs; ++r) {
      const double lr = log_spaced(o.min_lr, o.max_lr, r, o.num_runs);
      initial.restore();
      updates.rewind();
      double sum = 0;
      bool finite = true;
      for (int64_t i = 0; i < o.iters_per_run && finite; ++i) {
        const double loss = updates.update(lr);
        finite = std::isfinite(loss);
        if (i >= o.iters_per_run - tail) sum += loss;
      }
      const double loss = finite ? sum / double(tail) : std::numeric_limits<double>::quiet_NaN();
      const bool diverged = !finite || loss > o.diverge_factor * best;
      if (finite) best = std::min(best, loss);
      result.points.push_back({lr, loss, loss, diverged});
      if (print)
        std::cout << "find-lr: run " << r + 1 << "/" << o.num_runs << ": lr " << lr_text(lr) << " loss "
                  << (finite ? readable_number(loss) : "not finite") << (diverged ? " (diverged)" : "") << "\n"
                  << std::flush;
      if (diverged) {
        result.diverged = true;
        if (print && r + 1 < o.num_runs)
          std::cout << "find-lr: stopped at lr " << lr_text(lr) << ": the loss diverged; higher rates not tried\n";
        break;
      }
    }
  } else {
    double average = 0, best = std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < o.iters; ++i) {
      const double lr = log_spaced(o.min_lr, o.max_lr, i, o.iters);
      const double loss = updates.update(lr);
      average = o.smoothing * average + (1 - o.smoothing) * loss;
      const double smoothed = average / (1 - std::pow(o.smoothing, double(i + 1)));  // bias-corrected
      const bool diverged = !std::isfinite(loss) || (i >= 10 && smoothed > o.diverge_factor * best);
      result.points.push_back({lr, loss, smoothed, diverged});
      if (print && (i % 10 == 0 || i + 1 == o.iters))
        std::cout << "find-lr: update " << i + 1 << "/" << o.iters << ": lr " << lr_text(lr) << " loss "
                  << readable_number(loss) << " smoothed " << readable_number(smoothed) << "\n"
                  << std::flush;
      if (std::isfinite(smoothed)) best = std::min(best, smoothed);
      if (diverged) {
        result.diverged = true;
        if (print) std::cout << "find-lr: stopped at lr " << lr_text(lr) << ": the loss diverged\n";
        break;
      }
    }
  }
  initial.restore();
  t.set_fixed_lr(std::nullopt);
  suggest_learning_rate(result, o.mode);
  return result;
}

void suggest_learning_rate(LrFinderResult& r, const std::string& mode) {
  const auto& p = r.points;
  size_t m = p.size();  // the lowest (smoothed) loss
  for (size_t i = 0; i < p.size(); ++i)
    if (std::isfinite(p[i].smoothed) && (m == p.size() || p[i].smoothed < p[m].smoothed)) m = i;
  if (m == p.size() || !std::isfinite(p[0].smoothed)) {
    r.problem =
        "unusable curve: the loss is not finite at the smallest learning rate; check the data, the network and the "
        "loss";
    return;
  }
  // Usable only when some rate lowered the loss clearly below where the smallest rate left it.
  if (p[m].smoothed > 0.98 * p[0].smoothed) {
    r.problem = "unusable curve: no learning rate lowered the loss by 2% below the smallest one's (" +
                json_number(p[0].smoothed) + "); raise --max-lr" +
                std::string(mode == "restart" ? " or --iters-per-run" : " or --iters") +
                ", or check the data and the loss";
    return;
  }
  if (mode == "restart") {
    r.suggestion = p[m].lr;
    r.rule = "restart: the rate whose run ended with the lowest loss";
  } else {
    if (m < 3) {
      r.problem = "unusable curve: the loss was lowest at the very start of the sweep; lower --min-lr";
      return;
    }
    // Smith / fastai: where the smoothed loss falls fastest against log(lr), before its minimum.
    size_t steepest = 1;
    double slope_min = std::numeric_limits<double>::infinity();
    for (size_t i = 1; i < m; ++i) {
      const double slope = (p[i + 1].smoothed - p[i - 1].smoothed) / (std::log(p[i + 1].lr) - std::log(p[i - 1].lr));
      if (slope < slope_min) slope_min = slope, steepest = i;
    }
    r.suggestion = p[steepest].lr;
    r.rule = "sweep: where the smoothed loss falls fastest against log(lr), before its minimum at lr " +
             lr_text(p[m].lr) + " (the minimum / 10 = " + lr_text(p[m].lr / 10) + " is the other common choice)";
  }
  if (m + 1 == p.size() && !r.diverged)
    r.problem =
        "the loss was still falling at --max-lr: the best rate may be higher; raise --max-lr to see the whole curve";
}

std::string lr_finder_csv(const LrFinderResult& r) {
  // A non-finite loss is an empty cell (what CSV readers take for missing).
  auto cell = [](double v) { return std::isfinite(v) ? json_number(v) : std::string(); };
  std::string csv = "lr,loss,smoothed_loss,diverged\n";
  for (const auto& p : r.points)
    csv += json_number(p.lr) + "," + cell(p.loss) + "," + cell(p.smoothed) + "," + (p.diverged ? "1" : "0") + "\n";
  return csv;
}

Chart lr_finder_chart(const LrFinderResult& r, const std::string& title) {
  Chart c;
  c.title = title;
  c.x_label = "learning rate";
  c.y_label = "training loss";
  c.log_x = true;
  ChartSeries loss{"loss", {}, {}}, smoothed{"smoothed loss", {}, {}};
  bool has_smoothing = false;
  for (const auto& p : r.points) {
    loss.x.push_back(p.lr), loss.y.push_back(p.loss);
    smoothed.x.push_back(p.lr), smoothed.y.push_back(p.smoothed);
    has_smoothing = has_smoothing || p.smoothed != p.loss;
  }
  c.series.push_back(loss);
  if (has_smoothing) c.series.push_back(smoothed);
  // Diverged losses would flatten the curve: show up to a little above where it started.
  if (!r.points.empty() && std::isfinite(r.points[0].smoothed) && r.points[0].smoothed > 0)
    c.y_max = 1.5 * std::max(r.points[0].smoothed, r.points[0].loss);
  if (r.suggestion) {
    c.marker_x = *r.suggestion;
    c.marker_label = "suggested " + lr_text(*r.suggestion);
  }
  return c;
}

namespace {
namespace fs = std::filesystem;

void write_results(const std::string& out, const LrFinderResult& result, const std::string& title,
                   const std::string& mode) {
  fs::create_directories(out);
  write_file_atomic((fs::path(out) / "lr_finder.csv").string(), lr_finder_csv(result));
  write_file_atomic((fs::path(out) / "lr_finder.svg").string(), svg_line_chart(lr_finder_chart(result, title)));
  nlohmann::ordered_json j;
  j["mode"] = mode;
  j["suggestion"] = result.suggestion ? json_value(*result.suggestion) : nlohmann::ordered_json(nullptr);
  j["rule"] = result.rule;
  j["problem"] = result.problem;
  j["diverged"] = result.diverged;
  // The first rate that diverged: the finder tried nothing higher.
  for (const auto& p : result.points)
    if (p.diverged) {
      j["diverged_at_lr"] = json_value(p.lr);
      break;
    }
  write_file_atomic((fs::path(out) / "lr_finder.json").string(), json_text(j) + "\n");
}

}  // namespace

std::optional<LrFinderResult> Runner::find_lr(const LrFinderOptions& o, const std::string& out) const {
  const Experiment& e = experiment_;
  // The run directory is never touched: the finder trains a copy of the start state and writes only `out`.
  Session session(e, registry_, out);
  std::unique_ptr<EpochLoop> loop = assemble_stage(e, session.context, session.comm.get(), RunPaths(out));
  if (session.comm) session.comm->broadcast_module(*loop->network_module());
  const bool rank0 = session.context.rank == 0;
  if (rank0)
    std::cout << "find-lr: " << e.name << ": " << o.mode << " over [" << json_number(o.min_lr) << ", "
              << json_number(o.max_lr) << "], optimizer " << e.optimizer.plugin << ", batch " << e.loop.batch_per_device
              << " x " << session.context.world_size << " rank(s)\n"
              << std::flush;
  LrFinderResult result = find_learning_rate(*loop, session.comm.get(), o, rank0);
  if (!rank0) return std::nullopt;
  write_results(out, result, e.name + ": loss against learning rate (" + o.mode + ")", o.mode);
  return result;
}

}  // namespace trainyard::host
