#pragma once
/// additional_override components: replace named stages of the loop
/// (Caffe2 Playground's additional_override), for debugging or experiments.
///
/// replaces() names the slots the override takes; install() swaps them in the
/// table and may keep the previous function to call the default. Two
/// overrides of one stage need explicit `order:` values in the YAML (lower
/// installs first, so a higher order wraps a lower one).
///
/// Example: skip every test pass.
///   class NoTest : public trainyard::AdditionalOverride {
///     std::vector<std::string> replaces() const override { return {"test"}; }
///     void install(trainyard::Stages& s, trainyard::Loop&) override {
///       s.test = [] { return trainyard::MeterValues{}; };
///     }
///   };

#include <string>
#include <vector>

#include "trainyard/loop.h"

namespace trainyard {

class AdditionalOverride {
 public:
  virtual ~AdditionalOverride();
  /// Stage names from kStageNames.
  virtual std::vector<std::string> replaces() const = 0;
  virtual void install(Stages& stages, Loop& loop) = 0;
};

}  // namespace trainyard
