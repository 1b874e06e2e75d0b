#include "train/hooks.h"

#include <algorithm>

#include "train/guard.h"

namespace trainyard::host {

std::string priority::name(int64_t value) {
  switch (value) {
    case highest:
      return "highest";
    case very_high:
      return "very_high";
    case high:
      return "high";
    case above_normal:
      return "above_normal";
    case normal:
      return "normal";
    case below_normal:
      return "below_normal";
    case low:
      return "low";
    case very_low:
      return "very_low";
    case lowest:
      return "lowest";
    default:
      return std::to_string(value);
  }
}

void Hooks::add(std::shared_ptr<HostHook> hook, int64_t priority) {
  // After every hook of the same or a higher priority: ties keep the order added.
  auto at = std::upper_bound(entries_.begin(), entries_.end(), priority,
                             [](int64_t p, const Entry& e) { return p < e.priority; });
  entries_.insert(at, Entry{priority, std::move(hook)});
}

std::vector<CheckpointPart*> Hooks::checkpoint_parts() const {
  std::vector<CheckpointPart*> parts;
  for (const auto& e : entries_)
    if (CheckpointPart* part = e.hook->checkpoint_part()) parts.push_back(part);
  return parts;
}

std::vector<std::string> Hooks::listing() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(priority::name(e.priority) + ": " + e.hook->name());
  return out;
}

namespace {

// The SDK's Callback seen as a hook: the loop's events, guarded so that a
// failure names the plugin.
class CallbackHook final : public HostHook {
 public:
  explicit CallbackHook(const Built<Callback>& cb)
      : config_(*cb.config), callback_(cb.object), test_batches_(cb.facets.after_test_batch) {}
  std::string name() const override { return component_label(config_); }
  void before_run(LoopState& t) override {
    call("before_run", [&] { callback_->before_run(t); });
  }
  void after_run(LoopState& t) override {
    call("after_run", [&] { callback_->after_run(t); });
  }
  void before_epoch(LoopState& t) override {
    call("before_epoch", [&] { callback_->before_epoch(t); });
  }
  void after_epoch(LoopState& t) override {
    call("after_epoch", [&] { callback_->after_epoch(t); });
  }
  void before_train_iter(LoopState& t, const Batch& b) override {
    call("before_train_iter", [&] { callback_->before_train_iter(t, b); });
  }
  void after_train_iter(LoopState& t, const StepResult& r) override {
    call("after_train_iter", [&] { callback_->after_train_iter(t, r); });
  }
  void before_test(LoopState& t) override {
    call("before_test", [&] { callback_->before_test(t); });
  }
  void after_test_batch(LoopState& t, int64_t done, int64_t total) override {
    if (test_batches_) call("after_test_batch", [&] { callback_->after_test_batch(t, done, total); });
  }
  void after_test(LoopState& t, const MeterValues& v) override {
    call("after_test", [&] { callback_->after_test(t, v); });
  }
  void before_checkpoint(LoopState& t) override {
    call("before_checkpoint", [&] { callback_->before_checkpoint(t); });
  }
  void after_checkpoint(LoopState& t, const std::string& path) override {
    call("after_checkpoint", [&] { callback_->after_checkpoint(t, path); });
  }

 private:
  template <class F>
  void call(const char* event, F&& f) {
    guarded(config_, event, std::forward<F>(f));
  }
  const ComponentConfig& config_;
  std::shared_ptr<Callback> callback_;
  bool test_batches_;
};

}  // namespace

std::shared_ptr<HostHook> callback_hook(const Built<Callback>& callback) {
  return std::make_shared<CallbackHook>(callback);
}

}  // namespace trainyard::host
