#pragma once
// What every mode that runs the network on data shares: its forward in the
// run's precision, and one pass of the test meters over the test set on the
// weights the network holds now. The loop's test stage, `trainyard eval`,
// predict, embed and search all go through an Evaluator; none of them needs
// the loop.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/sections.h"
#include "data/loader.h"
#include "train/components.h"
#include "trainyard/loop.h"

namespace trainyard::host {

class Communicator;

/// What a test pass reads of the experiment.
struct TestPassSettings {
  int64_t samples = 0;     ///< loop.test_samples: the first N test samples (0: all of them)
  int64_t batch_size = 0;  ///< loop.test_batch_per_device, else loop.batch_per_device
  /// The test split's loader settings for a batch size (make_loader_options), asked at each pass.
  std::function<LoaderOptions(int64_t batch_size)> loader;
  std::string where;  ///< the experiment file, for the error when it has no test set
};
/// The settings from `loop:`; `where`: the experiment file.
TestPassSettings test_pass_settings(const LoopConfig& loop, std::string where,
                                    std::function<LoaderOptions(int64_t batch_size)> loader);

/// The meters' values over every rank (accumulators summed, rows gathered),
/// each named `prefix` + its name. Every rank calls it, in the same order.
MeterValues meter_values_over_ranks(const std::vector<Built<Meter>>& meters, const std::string& prefix,
                                    Communicator* comm);

class Evaluator {
 public:
  /// `precision`: loop.effective_precision(). `comm`: null in one process.
  Evaluator(const Components& components, const Context& context, std::string precision, TestPassSettings settings,
            Communicator* comm);

  /// The network's forward under the precision's autocast, its output as
  /// fp32; a failure names the network.
  at::Tensor forward(const Batch& batch) const;
  /// The test meters over this rank's share of the test set (every
  /// world_size-th sample), with rank 0's buffers, the network in eval mode
  /// and no gradients; test_* values over all ranks, test_bad_records where
  /// the dataset skips bad records. `after_batch(done, total)` after each batch.
  MeterValues test_pass(const std::function<void(int64_t done, int64_t total)>& after_batch = {});
  void set_communicator(Communicator* comm) { comm_ = comm; }

 private:
  const Components& c_;
  const Context& context_;
  std::string precision_;
  TestPassSettings settings_;
  Communicator* comm_;
  std::shared_ptr<LoaderStats> stats_ = std::make_shared<LoaderStats>();
};

}  // namespace trainyard::host
