#pragma once
/// Meter components: accumulate over a phase (a train epoch, a test pass) and
/// report named values.
///
/// The host prefixes each value name with the phase: a meter reporting
/// "accuracy_top1" shows up as train_accuracy_top1 and test_accuracy_top1.
/// State lives in accumulators() (sums and counts that add up across
/// processes), so the host can reduce meters over ranks and save them in
/// checkpoints; values() derives the results from them.
///
/// Example:
///   class Count : public trainyard::Meter {
///     void reset() override { n_ = 0; }
///     void update(const trainyard::MeterInput& in) override { n_ += in.batch.size(); }
///     std::vector<double> accumulators() const override { return {n_}; }
///     void set_accumulators(const std::vector<double>& a) override { n_ = a.at(0); }
///     std::map<std::string, double> values() const override { return {{"samples", n_}}; }
///     double n_ = 0;
///   };

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "trainyard/batch.h"

namespace trainyard {

/// What one iteration produced. Tensors are detached from the graph.
struct MeterInput {
  const Batch& batch;
  const at::Tensor& output;
  const at::Tensor& loss;  ///< 0-dim
};

class Meter {
 public:
  virtual ~Meter();
  virtual void reset() = 0;
  virtual void update(const MeterInput& input) = 0;
  /// Additive state: sums and counts. Same length after every update.
  virtual std::vector<double> accumulators() const = 0;
  virtual void set_accumulators(const std::vector<double>& values) = 0;
  /// Named results, without the phase prefix. Empty before any update.
  virtual std::map<std::string, double> values() const = 0;
};

}  // namespace trainyard
