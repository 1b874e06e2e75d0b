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

struct OneCycleOptions {
  double pct_start = 0, div_factor = 0, final_div_factor = 0;
};

const trainyard::TypedSchema<OneCycleOptions>& one_cycle_schema() {
  static const trainyard::TypedSchema<OneCycleOptions> s = [] {
    using O = OneCycleOptions;
    trainyard::TypedSchema<O> t;
    t.add("pct_start", &O::pct_start, 0.3, "share of the steps spent rising to the full rate").range(0.0, 1.0);
    t.add("div_factor", &O::div_factor, 25.0, "the rate starts at full / div_factor").min(1.0);
    t.add("final_div_factor", &O::final_div_factor, 1e4, "and ends at start / final_div_factor").min(1.0);
    return t;
  }();
  return s;
}

// Smith & Topin's 1cycle: from 1/div_factor up to 1 over the first pct_start
// of the steps, then down to 1/(div_factor * final_div_factor); cosine
// annealing on both legs (as PyTorch's OneCycleLR with anneal_strategy cos).
class OneCycle : public trainyard::AdditionalOverride {
 public:
  explicit OneCycle(const OneCycleOptions& o) : pct_(o.pct_start), div_(o.div_factor), final_div_(o.final_div_factor) {}
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

struct CyclicOptions {
  double min_factor = 0;
  int64_t step_size = 0;
  std::string mode;
  double gamma = 0;
};

const trainyard::TypedSchema<CyclicOptions>& cyclic_schema() {
  static const trainyard::TypedSchema<CyclicOptions> s = [] {
    using O = CyclicOptions;
    trainyard::TypedSchema<O> t;
    t.add("min_factor", &O::min_factor, 0.1, "the bottom of each cycle, as a fraction of the starting rate")
        .range(0.0, 1.0);
    t.add("step_size", &O::step_size, 2000, "steps in half a cycle").min(1);
    t.add("mode", &O::mode, "triangular",
          "triangular, triangular2 (height halves each cycle) or exp_range (times gamma^step)")
        .one_of({"triangular", "triangular2", "exp_range"});
    t.add("gamma", &O::gamma, 1.0, "exp_range: the per-step decay of the height").range(0.0, 1.0);
    return t;
  }();
  return s;
}

// Smith's cyclical learning rates: a triangle between min_factor and 1 with
// half-cycles of step_size steps; triangular2 halves the height each cycle,
// exp_range multiplies it by gamma^step.
class Cyclic : public trainyard::AdditionalOverride {
 public:
  explicit Cyclic(const CyclicOptions& o)
      : min_(o.min_factor), step_size_(o.step_size), mode_(o.mode), gamma_(o.gamma) {}
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
  r.add_override("one_cycle", "1cycle learning rate (Smith & Topin): cosine up, then cosine down far below the start",
                 one_cycle_schema().schema(), [](const trainyard::Options& o, const trainyard::Context&) {
                   return std::make_shared<OneCycle>(one_cycle_schema().bind(o));
                 });
  r.add_override("cyclic", "cyclical learning rate (Smith 2017): triangle waves between min_factor and the full rate",
                 cyclic_schema().schema(), [](const trainyard::Options& o, const trainyard::Context&) {
                   return std::make_shared<Cyclic>(cyclic_schema().bind(o));
                 });
}

}  // namespace

TRAINYARD_PLUGIN("schedules", "1.0.0", "learning-rate schedules as overrides of the schedule stage: one_cycle, cyclic",
                 register_components)
