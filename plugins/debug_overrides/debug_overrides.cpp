// no_test_no_checkpoint: Playground's example override; trains only.
// overfit_batches: trains every epoch on the same first N batches, the
// quickest check that a model can learn at all.
#include "debug_overrides.h"

#include <vector>

namespace debug_overrides {
namespace {

class NoTestNoCheckpoint : public trainyard::AdditionalOverride {
 public:
  std::vector<std::string> replaces() const override { return {"test", "checkpoint"}; }
  void install(trainyard::Stages& stages, trainyard::Loop&) override {
    stages.test = [] { return trainyard::MeterValues{}; };
    stages.checkpoint = [] {};
  }
};

class OverfitBatches : public trainyard::AdditionalOverride {
 public:
  explicit OverfitBatches(int64_t batches) : batches_(batches) {}
  std::vector<std::string> replaces() const override { return {"train_batches"}; }
  void install(trainyard::Stages& stages, trainyard::Loop&) override {
    auto cache = std::make_shared<std::vector<trainyard::Batch>>();
    stages.train_batches = [fallback = stages.train_batches, cache, n = batches_](int64_t epoch) {
      if (cache->empty()) {
        // The first N batches of the default order, kept for every epoch.
        trainyard::BatchStream source = fallback(epoch);
        for (int64_t i = 0; i < n; ++i) {
          auto b = source();
          if (!b) break;
          cache->push_back(std::move(*b));
        }
      }
      auto next = std::make_shared<size_t>(0);
      return trainyard::BatchStream([cache, next]() -> std::optional<trainyard::Batch> {
        if (*next >= cache->size()) return std::nullopt;
        return (*cache)[(*next)++];
      });
    };
  }

 private:
  int64_t batches_;
};

struct OverfitOptions {
  int64_t batches = 0;
};

const trainyard::TypedSchema<OverfitOptions>& overfit_typed_schema() {
  static const trainyard::TypedSchema<OverfitOptions> s = [] {
    trainyard::TypedSchema<OverfitOptions> t;
    t.add("batches", &OverfitOptions::batches, 1, "how many batches to train on, every epoch").min(1);
    return t;
  }();
  return s;
}

}  // namespace

std::shared_ptr<trainyard::AdditionalOverride> make_no_test_no_checkpoint() {
  return std::make_shared<NoTestNoCheckpoint>();
}

trainyard::Schema overfit_schema() { return overfit_typed_schema().schema(); }

std::shared_ptr<trainyard::AdditionalOverride> make_overfit(const trainyard::Options& options) {
  return std::make_shared<OverfitBatches>(overfit_typed_schema().bind(options).batches);
}

}  // namespace debug_overrides
