#pragma once
// `trainyard find-lr`: which learning rate to train at (pixelz' LR finder,
// Smith's range test). Two modes:
//   restart  num_runs learning rates, log-spaced in [min_lr, max_lr]; each run
//            starts from the same initial state and data and trains
//            iters_per_run updates; its loss is the mean of its last quarter.
//            A rate whose loss turns non-finite or exceeds diverge_factor
//            times the best so far diverged: it is marked, and no higher
//            rate is tried (as fastai and Lightning stop).
//   sweep    one run whose rate grows exponentially every update; the loss is
//            smoothed (exponential moving average); stops when it diverges.
// The network, the optimizer state, the learning rates and the RNG are put
// back as they were after every run and at the end. Under the distributed
// launch each point is the loss averaged over ranks. The mode is Runner's
// (run/runner.h: find_lr), its body in run/lr_finder.cpp.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/svg_chart.h"

namespace trainyard::host {

class EpochLoop;
class Communicator;

struct LrFinderOptions {
  std::string mode = "restart";  ///< restart | sweep
  double min_lr = 1e-6, max_lr = 1.0;
  int64_t num_runs = 12;        ///< restart
  int64_t iters_per_run = 20;   ///< restart: optimizer updates per run
  int64_t iters = 100;          ///< sweep: optimizer updates in all
  double smoothing = 0.98;      ///< sweep: moving-average weight of the past
  double diverge_factor = 4.0;  ///< stop once the (smoothed) loss exceeds this times its minimum
};

struct LrFinderPoint {
  double lr = 0;
  double loss = 0;        ///< restart: mean over the run's last quarter; sweep: the update's loss
  double smoothed = 0;    ///< sweep: the moving average (restart: = loss)
  bool diverged = false;  ///< the loss turned non-finite or exceeded diverge_factor x the best
};

struct LrFinderResult {
  std::vector<LrFinderPoint> points;
  std::optional<double> suggestion;  ///< empty when the curve is unusable
  std::string rule;                  ///< how the suggestion was chosen
  std::string problem;               ///< why there is no suggestion, or what to be careful about
  bool diverged = false;             ///< a rate diverged: the finder stopped there
};

/// Runs the finder on the loop's network, optimizer and training data.
LrFinderResult find_learning_rate(EpochLoop& loop, Communicator* comm, const LrFinderOptions& options,
                                  bool print_progress);
/// Picks the suggestion from the points (exposed for tests).
void suggest_learning_rate(LrFinderResult& result, const std::string& mode);

std::string lr_finder_csv(const LrFinderResult& result);
Chart lr_finder_chart(const LrFinderResult& result, const std::string& title);

}  // namespace trainyard::host
