#pragma once
/// Meter components: accumulate over a phase (a train epoch, a test pass) and
/// report named values, and optionally a structured result (a table such as
/// a confusion matrix, or a file) that the host writes to the run directory.
///
/// The host prefixes each value name with the phase: a meter reporting
/// "accuracy_top1" shows up as train_accuracy_top1 and test_accuracy_top1.
/// State lives in accumulators() (sums and counts that add up across
/// processes), so the host can reduce meters over ranks and save them in
/// checkpoints; values() derives the results from them.
///
/// update() runs at every step. On a GPU, reading a tensor's value there
/// (item(), cpu()) waits for the device and costs each step its overlap: keep
/// running sums as tensors on the output's device and read them in
/// accumulators() and values(), which the host calls only at the log
/// interval, at a phase's end and at checkpoints (the shipped loss,
/// topk_accuracy and confusion_matrix meters do so).
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
///
/// Structured results: after each test pass of a training run, the host
/// writes every test meter's results() under RUN_DIR/meters/: a table as
/// `<name>-e<epoch>.csv` (header row, then the rows), a file as
/// `<name>-e<epoch><extension>`, where <epoch> is loop.epoch() at the test
/// (the number of epochs completed at an epoch's end); a test in mid-epoch
/// (loop.test_every_iters) adds `-i<iteration>`. Results are derived
/// from accumulators(), so they are exact over all ranks; rank 0 writes them.
///
/// Example (a 2x2 confusion matrix from four accumulators):
///   std::vector<trainyard::MeterResult> results() const override {
///     trainyard::MeterResult r;
///     r.name = "confusion";
///     r.columns = {"true/predicted", "0", "1"};
///     r.rows = {{"0", fmt(n_[0]), fmt(n_[1])}, {"1", fmt(n_[2]), fmt(n_[3])}};
///     return {r};
///   }

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "trainyard/batch.h"

namespace trainyard {

/// A structured result: a table, a file, or both. `name` becomes the file
/// name stem: lower-case letters, digits, '_' and '-' only.
struct MeterResult {
  std::string name;
  /// A table (written as CSV): column names, then rows of cells, each row as
  /// long as `columns`. Empty `columns`: no table.
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  /// A file, written as is: its extension (with the dot, e.g. ".txt") and
  /// contents. Empty extension: no file.
  std::string file_extension;
  std::string file_contents;
};

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
  /// Structured results, derived from accumulators() like values(). The
  /// default has none.
  virtual std::vector<MeterResult> results() const;
};

/// Since SDK 1.4, optional: a meter whose state is one row per sample
/// instead of sums (a retrieval meter keeps every sample's embedding and
/// label: recall@k needs them all) derives from SampleMeter too.
///
/// Before values() and results(), the host gathers the rows of every rank:
/// it calls set_rows() with all ranks' rows concatenated in rank order, and
/// afterwards set_rows() with this rank's own again (as it does with
/// accumulators). accumulators() still carries any sums (it may be empty).
/// Such a meter measures test passes only: a training epoch is checkpointed
/// through accumulators alone, so `phases: [train]` is refused.
///
/// Keep the rows on the output's device while updating (a list of tensors
/// concatenated in rows()): no device sync at every step.
///
/// Example:
///   at::Tensor rows() const override { return parts_.empty() ? at::Tensor() : at::cat(parts_); }
///   void set_rows(const at::Tensor& rows) override { parts_ = {rows}; }
class SampleMeter {
 public:
  virtual ~SampleMeter();
  /// This rank's rows since reset(): a 2-d tensor `[samples, width]`, of one
  /// dtype and width for the meter's life; undefined before any update.
  virtual at::Tensor rows() const = 0;
  /// Replaces the rows (an undefined tensor: none).
  virtual void set_rows(const at::Tensor& rows) = 0;
};

}  // namespace trainyard
