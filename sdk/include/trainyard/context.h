#pragma once
/// What a component knows about the run it is part of.
///
/// Example:
///   auto net = std::make_shared<Mlp>(options, context.dataset.sample_numel(),
///                                    context.dataset.num_classes);
///   context.log("mlp: " + std::to_string(count) + " parameters");

#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "trainyard/options.h"

namespace trainyard {

class Collectives;

/// What the training dataset reports, so a network or loss can size itself.
struct DatasetInfo {
  int64_t size = 0;                      ///< samples in the split
  int64_t num_classes = 0;               ///< 0 when targets are not classes
  std::vector<int64_t> sample_shape;     ///< shape of one input, e.g. {1, 28, 28}
  std::vector<std::string> class_names;  ///< may be empty
  int64_t sample_numel() const;
};

struct Context {
  int rank = 0;
  int world_size = 1;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  uint64_t seed = 0;
  std::string run_dir;                       ///< where this run writes (may not exist yet while building)
  std::string experiment;                    ///< the experiment's name
  DatasetInfo dataset;                       ///< of the training split (empty while the training split itself is built)
  Extra extra;                               ///< the experiment's `extra:` section
  std::string component;                     ///< which entry this is, e.g. "network" or "meters[1]"
  const Collectives* collectives = nullptr;  ///< null in a single-process run
  bool sync_batch_norm = false;              ///< distributed.sync_batch_norm: use SyncBatchNorm2d for batch norm

  /// One line on stderr, prefixed with the rank in multi-process runs (and,
  /// under trainyard, in the run's log file).
  void log(const std::string& message) const;
};

namespace detail {
/// Where Context::log lines go instead of stderr: the host's log. Set once by
/// the host at start-up; not for plugins.
using LogHandler = void (*)(const std::string& line);
void set_log_handler(LogHandler handler);
}  // namespace detail

}  // namespace trainyard
