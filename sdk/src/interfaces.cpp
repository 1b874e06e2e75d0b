// Out-of-line destructors: they anchor each interface's vtable and typeinfo in
// the SDK library, so dynamic_cast and exceptions work across plugin boundaries.
#include <cstdio>

#include <ATen/ATen.h>

#include "trainyard/callback.h"
#include "trainyard/collectives.h"
#include "trainyard/dataset.h"
#include "trainyard/error.h"
#include "trainyard/loss.h"
#include "trainyard/meter.h"
#include "trainyard/network.h"
#include "trainyard/optimizer.h"
#include "trainyard/override.h"
#include "trainyard/plugin.h"
#include "trainyard/version.h"

namespace trainyard {

Error::Error(const std::string& message) : std::runtime_error(message) {}
Error::~Error() = default;
ConfigError::ConfigError(const std::string& message) : Error(message) {}
ConfigError::ConfigError(const std::string& what, const std::string& expected_and_got,
                         const std::string& hint)
    : Error(what + "; " + expected_and_got + (hint.empty() ? "" : "; " + hint)) {}
ConfigError::~ConfigError() = default;
BadRecord::BadRecord(const std::string& reason) : Error(reason) {}
BadRecord::~BadRecord() = default;

Dataset::~Dataset() = default;
Network::~Network() = default;
Loss::~Loss() = default;
Optimizer::~Optimizer() = default;
Meter::~Meter() = default;
std::vector<MeterResult> Meter::results() const { return {}; }
Callback::~Callback() = default;
AdditionalOverride::~AdditionalOverride() = default;
Loop::~Loop() = default;
Registrar::~Registrar() = default;
Collectives::~Collectives() = default;

const char* sdk_fingerprint() { return TRAINYARD_FINGERPRINT; }
const char* sdk_api_version() {
  return TRAINYARD_STR(TRAINYARD_VERSION_MAJOR) "." TRAINYARD_STR(TRAINYARD_VERSION_MINOR);
}
const char* sdk_version() { return TRAINYARD_VERSION; }

int64_t DatasetInfo::sample_numel() const {
  int64_t n = 1;
  for (int64_t d : sample_shape) n *= d;
  return n;
}

void Context::log(const std::string& message) const {
  if (world_size > 1)
    std::fprintf(stderr, "[rank %d] %s\n", rank, message.c_str());
  else
    std::fprintf(stderr, "%s\n", message.c_str());
}

Example Dataset::get_seeded(int64_t index, uint64_t /*seed*/) const { return get(index); }

Batch Dataset::get_batch(const std::vector<int64_t>& indices, const std::vector<uint64_t>& seeds) const {
  if (seeds.size() != indices.size())
    throw Error("Dataset::get_batch: " + std::to_string(indices.size()) + " indices but " +
                std::to_string(seeds.size()) + " seeds; expected one seed per index");
  std::vector<at::Tensor> inputs, targets;
  inputs.reserve(indices.size());
  targets.reserve(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    Example e = get_seeded(indices[k], seeds[k]);
    inputs.push_back(std::move(e.input));
    targets.push_back(std::move(e.target));
  }
  return Batch{at::stack(inputs), at::stack(targets), indices};
}

}  // namespace trainyard
