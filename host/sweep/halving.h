#pragma once
// Asynchronous successive halving (ASHA; Li et al., "A System for Massively
// Parallel Hyperparameter Tuning", MLSys 2020): trials train to the first
// rung's epochs; whenever a worker is free, a trial in the top 1/reduction of
// a rung's results so far is promoted to the next rung (the highest rung
// first), else a new trial starts. Trials not promoted stop where they are.
// No rung waits for all of its trials: that is the "asynchronous".
//
// The scheduler is bookkeeping only; sweep_run.cpp runs the trials, each to
// a rung with `trainyard run --until-epoch E` (the schedule stays that of the
// full loop.epochs, so a promoted trial continues exactly as a run that was
// never stopped).
#include <cstdint>
#include <optional>
#include <vector>

namespace trainyard::host {

class Halving {
 public:
  /// Rungs at min_epochs x reduction^k below max_epochs, then max_epochs.
  /// `maximize`: higher rung values are better. New trials start in
  /// `start_order` (a permutation of 0..trials-1; empty: in index order).
  /// Asynchronous promotion assumes trials arrive in no particular order: a
  /// grid sorted from worst to best would see every newcomer promoted.
  Halving(int64_t min_epochs, int64_t max_epochs, int64_t reduction, bool maximize, size_t trials,
          std::vector<size_t> start_order = {});

  const std::vector<int64_t>& rungs() const { return rungs_; }

  struct Job {
    size_t trial;
    size_t rung;  ///< train to rungs()[rung] epochs
  };
  /// The next job for a free worker: a promotion, else a new trial; none
  /// when every trial has started and nothing can be promoted now.
  std::optional<Job> next();
  /// The trial completed rung `rung` with `value` (its metric at that epoch).
  void completed(size_t trial, size_t rung, double value);
  /// The trial failed; it takes no further part.
  void failed(size_t trial);
  /// Recovery after a restart: the trial had already been started and
  /// promoted as far as `rung` (its run directory shows the epochs).
  void restore_started(size_t trial, size_t rung);

  /// The highest rung a trial completed, or -1.
  int64_t completed_rung(size_t trial) const { return trials_[trial].completed; }
  /// Its metric at that rung.
  double value(size_t trial) const { return trials_[trial].value; }

 private:
  struct Trial {
    bool started = false, failed = false;
    int64_t target = -1;     ///< the rung it is training towards
    int64_t completed = -1;  ///< the highest rung completed
    double value = 0;        ///< at that rung
    std::vector<double> at;  ///< value at each completed rung
  };
  std::vector<int64_t> rungs_;
  int64_t reduction_;
  bool maximize_;
  std::vector<Trial> trials_;
  std::vector<size_t> order_;  ///< the order new trials start in
  size_t next_new_ = 0;        ///< into order_
};

/// 0..n-1 shuffled by `seed` (a sweep's --seed): the order a sweep starts
/// its halving trials in.
std::vector<size_t> seeded_order(size_t n, uint64_t seed);

}  // namespace trainyard::host
