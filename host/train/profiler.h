#pragma once
// `trainyard run EXP --profile A:B`: a Kineto trace (LibTorch's profiler, the
// one torch.profiler drives) of train iterations A+1..B of this process, as
// a hook. Writes RUN_DIR/profile/rankR.pt.trace.json (a Chrome trace that
// Perfetto and chrome://tracing open and TensorBoard's PyTorch profiler view
// lists) and rankR.summary.txt: the operators by self time, and each step's
// time split into data wait, forward, backward, optimizer, the ranks'
// agreement (data parallel) and the rest (trainyard's own bookkeeping:
// meters, logs, hooks, periodic tests), and the host syncs (.item() calls,
// CUDA synchronisations) and kernel launches per step; the same counts and
// split as JSON in rankR.profile_summary.json.
#include <cstdint>
#include <memory>
#include <string>

namespace trainyard::host {

class HostHook;

/// Which train iterations to record: skip `skip` (warm-up: the allocator,
/// oneDNN's kernel choices), then record `steps`.
struct ProfileWindow {
  int64_t skip = 0, steps = 0;
};

/// "20:30" (skip 20, record 10) or "10" (record the first 10). Throws
/// ConfigError naming --profile.
ProfileWindow parse_profile_window(const std::string& text);

/// The loop's phases, marked in the trace as user annotations (cheap when no
/// profiler listens: one flag check each).
namespace trace_scope {
inline constexpr const char* data_wait = "trainyard::data_wait";
inline constexpr const char* forward = "trainyard::forward";
inline constexpr const char* backward = "trainyard::backward";
inline constexpr const char* optimizer = "trainyard::optimizer";
inline constexpr const char* ranks = "trainyard::ranks";  ///< data parallel: the ranks agree, rank 0's buffers
}  // namespace trace_scope

/// The profiling hook (priority lowest: a step ends after every other hook of
/// its iteration). `dir` is RUN_DIR/profile; each rank writes its own files,
/// rank 0 also shows the summary. One hook may serve every stage of a run: it
/// counts iterations across them.
std::shared_ptr<HostHook> profiler_hook(ProfileWindow window, std::string dir);

}  // namespace trainyard::host
