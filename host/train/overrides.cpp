#include "train/overrides.h"

#include "train/guard.h"

namespace trainyard::host {

bool install_overrides(const std::vector<Built<AdditionalOverride>>& overrides, Stages& stages, Loop& loop) {
  bool replaces_batches = false;
  for (const auto& o : overrides) {
    guarded(*o.config, "install", [&] { o.object->install(stages, loop); });
    const ComponentConfig& who = *o.config;
    for (const auto& stage : o.object->replaces()) {
      if (stage == "train_batches") replaces_batches = true;
      // One wrapper for every stage, from the SDK's stage table (TRAINYARD_STAGES).
      stages.for_each([&](const char* name, auto& slot) {
        if (stage != name) return;
        slot = [f = slot, &who, action = "stage " + stage](auto&&... args) {
          return guarded(who, action.c_str(), [&] { return f(args...); });
        };
      });
    }
  }
  return replaces_batches;
}

}  // namespace trainyard::host
