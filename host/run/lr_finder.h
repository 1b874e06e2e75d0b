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
#include "run/mode_requests.h"

namespace trainyard::host {

class EpochLoop;
class Communicator;

/// Runs the finder on the loop's network, optimizer and training data.
LrFinderResult find_learning_rate(EpochLoop& loop, Communicator* comm, const LrFinderOptions& options,
                                  bool print_progress);
/// Picks the suggestion from the points (exposed for tests).
void suggest_learning_rate(LrFinderResult& result, const std::string& mode);

std::string lr_finder_csv(const LrFinderResult& result);
Chart lr_finder_chart(const LrFinderResult& result, const std::string& title);

}  // namespace trainyard::host
