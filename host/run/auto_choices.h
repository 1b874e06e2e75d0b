#pragma once
// Every `auto` setting the host resolves from the machine, in one place:
// loop.precision (from the CPU's or GPU's bfloat16 support, once the
// experiment is loaded) and loop.cudnn_benchmark (from the datasets' sample
// shape, once they are built). What each became and why is printed and
// recorded; the setting itself stays `auto`, so a resume on another machine
// may choose otherwise.
#include <string>
#include <vector>

#include "config/experiment.h"
#include "trainyard/context.h"

namespace trainyard::host {

/// Resolves loop.precision on this machine (the experiment's and each
/// stage's): `auto` becomes a precision, a written one may get a warning
/// (choose_precision()). load_experiment() calls it.
void resolve_precision(Experiment& experiment);

/// Says what auto chose and why, and warns about a precision that is slow
/// here, each line once over `loops` (the experiment's loop section and each
/// stage's): at validate and at a run's start (rank 0).
void announce_precision(const std::vector<const LoopConfig*>& loops);

/// loop.cudnn_benchmark resolved for this process: auto is on where the
/// input shape is fixed, as PyTorch users set torch.backends.cudnn.benchmark.
struct CudnnBenchmark {
  bool on = false;
  std::string reason;
};
CudnnBenchmark cudnn_benchmark_choice(const std::string& setting, const Context& context);

}  // namespace trainyard::host
