// schedules: learning-rate schedules as additional_overrides of the
// `schedule` stage (use with `schedule: {policy: custom}`). They are also the
// example of a custom schedule: replace the stage, return a factor of each
// group's starting rate from (step, total_steps).
#include <algorithm>
#include <cmath>

#include <trainyard/error.h>
#include <trainyard/override.h>
#include <trainyard/plugin.h>

namespace {

double cosine_between(double from, double to, double progress) {
  return to + (from - to) * 0.5 * (1 + std::cos(M_PI * std::clamp(progress, 0.0, 1.0)));
}

// Smith & Topin's 1cycle: from 1/div_factor up to 1 over the first pct_start
// of the steps, then down to 1/(div_factor * final_div_factor); cosine
// annealing on both legs (as PyTorch's OneCycleLR with anneal_strategy cos).
class OneCycle : public trainyard::AdditionalOverride {
 public:
  explicit OneCycle(const trainyard::Options& o)
      : pct_(o.get<double>("pct_start")), div_(o.get<double>("div_factor")), final_div_(o.get<double>("final_div_factor")) {}
  std::vector<std::string> replaces() const override { return {"schedule"}; }
  void install(trainyard::Stages& s, trainyard::Loop&) override {
    s.schedule = [this](int64_t step, int64_t total) {
      const double up = std::max(1.0, pct_ * double(total));
      if (double(step) < up) return cosine_between(1 / div_, 1.0, double(step) / up);
      return cosine_between(1.0, 1 / (div_ * final_div_), (double(step) - up) / std::max(1.0, double(total) - up));
    };
  }

 private:
  double pct_, div_, final_div_;
};

// Smith's cyclical learning rates: a triangle between min_factor and 1 with
// half-cycles of step_size steps; triangular2 halves the height each cycle,
// exp_range multiplies it by gamma^step.
class Cyclic : public trainyard::AdditionalOverride {
 public:
  explicit Cyclic(const trainyard::Options& o)
      : min_(o.get<double>("min_factor")),
        step_size_(o.get<int64_t>("step_size")),
        mode_(o.get<std::string>("mode")),
        gamma_(o.get<double>("gamma")) {}
  std::vector<std::string> replaces() const override { return {"schedule"}; }
  void install(trainyard::Stages& s, trainyard::Loop&) override {
    s.schedule = [this](int64_t step, int64_t) {
      const int64_t cycle = step / (2 * step_size_);
      const double x = std::abs(double(step) / double(step_size_) - 2.0 * double(cycle) - 1.0);
      double height = (1 - min_) * std::max(0.0, 1 - x);
      if (mode_ == "triangular2") height /= std::pow(2.0, double(cycle));
      if (mode_ == "exp_range") height *= std::pow(gamma_, double(step));
      return min_ + height;
    };
  }

 private:
  double min_;
  int64_t step_size_;
  std::string mode_;
  double gamma_;
};

void register_components(trainyard::Registrar& r) {
  trainyard::Schema one_cycle;
  one_cycle.add("pct_start", 0.3, "share of the steps spent rising to the full rate").range(0.0, 1.0);
  one_cycle.add("div_factor", 25.0, "the rate starts at full / div_factor").min(1.0);
  one_cycle.add("final_div_factor", 1e4, "and ends at start / final_div_factor").min(1.0);
  r.add_override("one_cycle", "1cycle learning rate (Smith & Topin): cosine up, then cosine down far below the start",
                 one_cycle, [](const trainyard::Options& o, const trainyard::Context&) {
                   return std::make_shared<OneCycle>(o);
                 });
  trainyard::Schema cyclic;
  cyclic.add("min_factor", 0.1, "the bottom of each cycle, as a fraction of the starting rate").range(0.0, 1.0);
  cyclic.add("step_size", 2000, "steps in half a cycle").min(1);
  cyclic.add("mode", "triangular", "triangular, triangular2 (height halves each cycle) or exp_range (times gamma^step)")
      .one_of({"triangular", "triangular2", "exp_range"});
  cyclic.add("gamma", 1.0, "exp_range: the per-step decay of the height").range(0.0, 1.0);
  r.add_override("cyclic", "cyclical learning rate (Smith 2017): triangle waves between min_factor and the full rate",
                 cyclic, [](const trainyard::Options& o, const trainyard::Context&) {
                   return std::make_shared<Cyclic>(o);
                 });
}

}  // namespace

TRAINYARD_PLUGIN("schedules", "1.0.0", "learning-rate schedules as overrides of the schedule stage: one_cycle, cyclic",
                 register_components)
