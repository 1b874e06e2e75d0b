#pragma once
// Two rules about a training step, each stated once and applied twice: when
// the experiment file is read (with what the file says; the rest unknown) and
// when the run starts (with everything): where an update's checks are read
// (the Updater chooses its non-finite policy by it), and whether a step can be
// captured as a CUDA graph (loop.cuda_graph refuses by it).
#include <cstdint>
#include <optional>
#include <string>

namespace trainyard::host {

/// What decides where an update's checks (its gradient norm, loop.nonfinite)
/// are read. nullopt: not known yet (the file says auto; the optimizer is
/// not built yet).
struct CheckPlacementFacts {
  std::optional<int64_t> checks_every;  ///< loop.update_checks_every, resolved
  bool loss_scaler = false;             ///< fp16-mixed: the scaler reads every update
  bool debug = false;                   ///< trainyard run --debug
  bool find_lr = false;                 ///< find-lr holds the rate and reads each loss
  std::string nonfinite = "error";      ///< loop.nonfinite
  std::optional<bool> optimizer_skips;  ///< the optimizer can skip a step on the device (SkippableStep)
};

/// "" when the checks may stay on the device between reads (every
/// checks_every updates), else why the host reads them at every update:
/// "loop.update_checks_every is 1", "fp16-mixed's loss scaler reads ...". A
/// fact that is not known yet refuses nothing.
std::string why_checks_read_every_update(const CheckPlacementFacts& facts);

/// What decides whether a step can be captured as a CUDA graph.
struct CudaGraphFacts {
  std::optional<bool> built_with_cuda;  ///< this trainyard's LibTorch has CUDA
  bool cuda = false;                    ///< the network trains on a CUDA device (distributed.num_gpus > 0)
  std::optional<int> world_size;        ///< processes in the run
  int64_t iter_size = 1;                ///< loop.iter_size
  CheckPlacementFacts checks;           ///< where the update's checks are read, as far as known
  /// The run's own answer (the Updater's why_checks_read_every_update, made
  /// by this rule with every fact): used instead of `checks` when set.
  std::optional<std::string> checks_read_every_update;
  std::optional<bool> fixed_sample_shape;  ///< the datasets declare one sample shape
  bool train_step_overridden = false;      ///< an additional_override replaces the train_step stage
  bool sample_fields = false;              ///< the training samples carry fields (SDK 1.5: boxes, ...)
};

/// Why a step cannot be captured: what is wrong and what was expected, for
/// one error line ("loop.cuda_graph: <why>; <expected>").
struct CudaGraphRefusal {
  std::string why, expected;
  std::string line() const { return why + "; " + expected; }
};

/// The first reason `run` cannot capture its step, or nothing when it can
/// (as far as the facts known say).
std::optional<CudaGraphRefusal> cuda_graph_refusal(const CudaGraphFacts& run);

}  // namespace trainyard::host
