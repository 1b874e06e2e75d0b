// Any bytes as an experiment file: parsing and validation must end in a
// result or a trainyard::Error (ConfigError), never a crash, a hang, an
// uncaught YAML exception or a sanitizer report.
#include "config/experiment.h"
#include "fake_registry.h"
#include "trainyard/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch("experiment.yaml");
  fuzz::write(path, data, size);
  try {
    auto e = trainyard::host::validate_experiment(trainyard::host::read_experiment(path, {}), fuzz::registry());
    (void)e.resolved();  // what config.yaml would hold
  } catch (const trainyard::Error&) {}
  return 0;
}
