// Out-of-line destructors: they anchor each interface's vtable and typeinfo in
// the SDK library, so dynamic_cast and exceptions work across plugin boundaries.
#include <cstdio>

#include <ATen/ATen.h>

#include "trainyard/callback.h"
#include "trainyard/collectives.h"
#include "trainyard/dataset.h"
#include "trainyard/embeddings.h"
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
ConfigError::ConfigError(const std::string& what, const std::string& expected_and_got, const std::string& hint)
    : Error(what + "; " + expected_and_got + (hint.empty() ? "" : "; " + hint)) {}
ConfigError::~ConfigError() = default;
BadRecord::BadRecord(const std::string& reason) : Error(reason) {}
BadRecord::~BadRecord() = default;
DataError::~DataError() = default;

Dataset::~Dataset() = default;
AllLabels::~AllLabels() = default;
Network::~Network() = default;
Loss::~Loss() = default;
EmbeddingLoss::~EmbeddingLoss() = default;
LossValues::~LossValues() = default;
LossParameters::~LossParameters() = default;
NetworkOutputs::~NetworkOutputs() = default;
ScriptedModule::~ScriptedModule() = default;
SampleMeter::~SampleMeter() = default;
Optimizer::~Optimizer() = default;
SkippableStep::~SkippableStep() = default;
Meter::~Meter() = default;
std::vector<MeterResult> Meter::results() const { return {}; }
Callback::~Callback() = default;
AdditionalOverride::~AdditionalOverride() = default;
Loop::~Loop() = default;
Registrar::~Registrar() = default;
Collectives::~Collectives() = default;

at::Tensor l2_normalize_rows(const at::Tensor& rows) {
  return rows / rows.norm(2, /*dim=*/1, /*keepdim=*/true).clamp_min(1e-12);
}

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

namespace {
detail::LogHandler log_handler = nullptr;
}  // namespace

void detail::set_log_handler(LogHandler handler) { log_handler = handler; }

void Context::log(const std::string& message) const {
  const std::string line = world_size > 1 ? "[rank " + std::to_string(rank) + "] " + message : message;
  if (log_handler)
    log_handler(line);
  else
    std::fprintf(stderr, "%s\n", line.c_str());
}

Example Dataset::get_seeded(int64_t index, uint64_t /*seed*/) const { return get(index); }

std::optional<std::map<std::string, Value>> Dataset::image_preprocessing() const { return std::nullopt; }

std::optional<InputNormalization> Dataset::input_normalization() const { return std::nullopt; }

bool Dataset::streamed() const { return false; }

void Dataset::begin_pass(int64_t /*epoch*/, int64_t /*first*/) const {}

namespace {
std::string shape_text(at::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
}  // namespace

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
  // Samples of one batch share a shape; say which differ rather than let
  // at::stack say "stack expects each tensor to be equal size".
  for (size_t k = 1; k < indices.size(); ++k)
    for (const auto* list : {&inputs, &targets})
      if ((*list)[k].defined() && (*list)[0].defined() && (*list)[k].sizes() != (*list)[0].sizes())
        throw ConfigError("samples " + std::to_string(indices[0]) + " and " + std::to_string(indices[k]) +
                              " differ in " + (list == &inputs ? "input" : "target") + " shape",
                          "expected the samples of a batch to have one shape, got " + shape_text((*list)[0].sizes()) +
                              " and " + shape_text((*list)[k].sizes()),
                          "give the dataset load_size (and crop_size) so that every image has the same size");
  return Batch{at::stack(inputs), at::stack(targets), indices};
}

}  // namespace trainyard
