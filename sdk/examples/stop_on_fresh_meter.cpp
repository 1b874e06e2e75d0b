// example_callback: a callback that reads meters. stop_on_fresh_meter stops
// the run once a meter reaches a target, but only on a value computed at the
// current iteration: after a skipped test pass the loop still holds the
// previous test's value, and acting on it again would be acting on old news.
// Loop::meter_readings() gives each value with the epoch and iteration at
// which it was computed.
//
// Experiment:
//   callbacks: [{plugin: stop_on_fresh_meter, meter: test_accuracy_top1, target: 0.95}]
#include <trainyard/callback.h>
#include <trainyard/plugin.h>

namespace {

// The options as a struct; the TypedSchema below binds each field to its key.
struct StopOnFreshMeterOptions {
  std::string meter;
  double target = 0;
};

class StopOnFreshMeter : public trainyard::Callback {
 public:
  explicit StopOnFreshMeter(const StopOnFreshMeterOptions& o) : meter_(o.meter), target_(o.target) {}
  void after_epoch(trainyard::Loop& loop) override {
    const auto& readings = loop.meter_readings();
    auto it = readings.find(meter_);
    if (it == readings.end()) return;  // not computed yet
    const trainyard::MeterReading& r = it->second;
    if (r.iteration != loop.iteration()) {
      loop.context().log("stop_on_fresh_meter: " + meter_ + " is left over from epoch " + std::to_string(r.epoch) +
                         "; waiting for a fresh value");
      return;
    }
    if (r.value >= target_)
      loop.request_stop(meter_ + " reached " + std::to_string(r.value) + " at epoch " + std::to_string(r.epoch));
  }

 private:
  std::string meter_;
  double target_;
};

void register_components(trainyard::Registrar& r) {
  using O = StopOnFreshMeterOptions;
  trainyard::TypedSchema<O> schema;
  schema.add("meter", &O::meter, "test_accuracy_top1", "meter to watch, phase-prefixed");
  schema.add("target", &O::target, 0.95, "stop when a fresh value reaches this");
  r.add_callback("stop_on_fresh_meter",
                 "stops when a freshly computed meter value reaches a target (trainyard example)", schema.schema(),
                 [schema](const trainyard::Options& o, const trainyard::Context&) {
                   return std::make_shared<StopOnFreshMeter>(schema.bind(o));
                 });
}

}  // namespace

TRAINYARD_PLUGIN("example_callback", "1.0.0", "example: a callback that reads meters", register_components)
