#pragma once
// The `stopping:` section at work: a target value that ends the run, early
// stopping after `patience` epochs without improvement, and the best value
// so far (for best.pt). Judged once per epoch, after its test.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/experiment.h"
#include "trainyard/loop.h"

namespace trainyard::host {

/// What a checkpoint keeps of the rule's progress.
struct StoppingProgress {
  double best = 0;
  bool has_best = false;
  int64_t epochs_without_improvement = 0;
};

class StoppingRule {
 public:
  /// `where` locates a key of the section ("target_meter") in the
  /// experiment file, for errors: "FILE:LINE:COL: stopping.target_meter".
  StoppingRule(StoppingConfig config, std::function<std::string(const std::string& key)> where);

  /// The stop message when the target is met by `values`; "" when not met or
  /// no target is set; nullopt when the target's meter has no value.
  std::optional<std::string> target_reached(const MeterValues& values) const;

  struct Verdict {
    bool improved = false;           ///< this epoch is the best so far by `monitor`
    std::vector<std::string> stops;  ///< reasons to stop (target reached, early stop), in that order
  };
  /// Judges an epoch's values. Throws LocatedConfigError when a named meter has no value.
  Verdict judge_epoch(const MeterValues& values);

  /// Patience ran out (also in an earlier run of a resumed one).
  bool out_of_patience() const {
    return config_.patience > 0 && progress_.epochs_without_improvement >= config_.patience;
  }
  /// The best value carries over to a stage watching the same meter the same way.
  bool watches_like(const StoppingRule& other) const {
    return config_.monitor == other.config_.monitor && config_.mode == other.config_.mode;
  }
  const StoppingConfig& config() const { return config_; }
  StoppingProgress& progress() { return progress_; }
  const StoppingProgress& progress() const { return progress_; }

 private:
  bool minimized(const std::string& meter) const;  ///< stopping.mode for this meter

  StoppingConfig config_;
  std::function<std::string(const std::string& key)> where_;
  StoppingProgress progress_;
};

}  // namespace trainyard::host
