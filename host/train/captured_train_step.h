#pragma once
// loop.cuda_graph as a step replacement: the loop's train_step stage
// replaced, as an override wraps a stage, by one that captures the step's
// forward, loss and backward as a CUDA graph (train/cuda_graph.h) and
// replays it. The loop knows nothing of it: the assembler installs it when a
// mode that trains builds the stage, before anything is written, so a run
// whose step cannot be captured is refused before its run directory exists.
#include <cstdint>

namespace trainyard::host {

class EpochLoop;

/// Replaces `loop`'s train_step stage: steps before the capture (3, and
/// never before --profile's first recorded step `profile_skip`+1) run
/// eagerly on the capture's stream, then the step is captured and replayed;
/// a batch the graph does not fit (a shorter last batch) runs the stage it
/// replaced. Throws ConfigError with cuda_graph_refusal()'s reason (config/step_rules.h) when this
/// run's step cannot be captured. Call after the loop's debug setting.
void install_captured_train_step(EpochLoop& loop, int64_t profile_skip);

}  // namespace trainyard::host
