#include "run/auto_choices.h"

#include <optional>
#include <set>

#include "distributed/device.h"
#include "log/log.h"
#include "train/precision.h"
#include "util/shape.h"

namespace trainyard::host {

void resolve_precision(Experiment& e) {
  std::optional<GpuFacts> gpu;
  if (e.distributed.num_gpus > 0) {
    gpu = gpu_facts(e.distributed.first_gpu_id);
    if (!gpu) gpu = gpu_facts(0);  // one GPU per rank (rank_device picks it)
  }
  auto resolve = [&](Experiment& x) {
    const PrecisionChoice c = choose_precision(x.loop.precision, cpu_facts(), x.distributed.num_gpus > 0, gpu);
    x.loop.precision_used = c.precision;
    x.loop.precision_reason = c.reason;
    x.loop.precision_warning = c.warning;
  };
  resolve(e);
  for (auto& stage : e.stages) resolve(stage);
}

void announce_precision(const std::vector<const LoopConfig*>& loops) {
  std::set<std::string> said;  // stages usually agree: each line once
  for (const LoopConfig* loop : loops) {
    if (loop->precision == "auto" && said.insert(loop->precision_used + loop->precision_reason).second)
      log_info("trainyard: loop.precision auto: " + loop->effective_precision() + " (" + loop->precision_reason + ")");
    if (!loop->precision_warning.empty() && said.insert(loop->precision_warning).second)
      log_warning("warning: " + loop->precision_warning);
  }
}

CudnnBenchmark cudnn_benchmark_choice(const std::string& setting, const Context& context) {
  if (!context.device.is_cuda()) return {false, "not a CUDA run: cuDNN is not used"};
  if (setting != "auto") return {setting == "true", "as written"};
  if (context.dataset.sample_shape.empty())
    return {false, "auto: the datasets give no fixed sample shape (the autotuner would time every new shape)"};
  return {true, "auto: a CUDA run with a fixed sample shape " + shape_text(context.dataset.sample_shape)};
}

}  // namespace trainyard::host
