#include "run/session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include <ATen/Parallel.h>

#include <unistd.h>

#include <set>

#include "config/snapshot.h"
#include "distributed/device.h"
#include "log/log.h"
#include "plugins/loader.h"
#include "train/precision.h"
#include "trainyard/error.h"
#include "util/text.h"

namespace trainyard::host {
namespace {

// Hashes for comparing ranks (FNV-1a, 64 bits).
std::string fingerprint_of(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Two ranks on one GPU fail inside NCCL ("duplicate GPU") or share its
// memory: a launcher that gives each rank one visible GPU makes every rank
// see index 0, so the physical GPUs are compared.
void check_one_gpu_per_rank(Communicator& comm, const World& world, c10::Device device) {
  const auto gpu = gpu_facts(device.index());
  if (!gpu) return;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::vector<std::string> used = comm.exchange(std::string(host) + " " + gpu->uuid);
  for (int r = 0; r < world.world_size; ++r)
    for (int q = 0; q < r; ++q)
      if (used[r] == used[q])
        throw ConfigError("distributed.num_gpus: ranks " + std::to_string(q) + " and " + std::to_string(r) +
                              " both train on GPU " + used[r] + " (" + gpu->name + ")",
                          "expected one GPU per rank",
                          "start as many processes per node as it has GPUs, or give each rank its own "
                          "(CUDA_VISIBLE_DEVICES, Slurm's --gpus-per-task=1)");
}

}  // namespace

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

void announce_precision(const Experiment& e) {
  std::set<std::string> said;  // stages usually agree: each line once
  auto announce = [&](const Experiment& x) {
    const LoopConfig& loop = x.loop;
    if (loop.precision == "auto" && said.insert(loop.precision_used + loop.precision_reason).second)
      log_info("trainyard: loop.precision auto: " + loop.effective_precision() + " (" + loop.precision_reason + ")");
    if (!loop.precision_warning.empty() && said.insert(loop.precision_warning).second)
      log_warning("warning: " + loop.precision_warning);
  };
  announce(e);
  for (const auto& stage : e.stages) announce(stage);
}

Context make_context(const Experiment& e, const World& world) {
  Context context;
  context.rank = world.rank;
  context.world_size = world.world_size;
  context.seed = e.seed;
  context.experiment = e.name;
  context.extra = Extra(e.extra);
  context.device = rank_device(e, world);
  make_current(context.device);  // every later CUDA call without a device goes to this GPU
  at::set_num_threads(threads_for(world, e.distributed.threads_per_process));
  return context;
}

// make_context picks the rank's device and makes it current, before anything
// touches CUDA (NCCL's group included).
Session::Session(const Experiment& e, const Registry& registry, const std::string& run_dir)
    : world(detect_world(e)), context(make_context(e, world)) {
  set_log_rank(world.rank, world.world_size);
  if (world.distributed()) {
    comm = std::make_unique<Communicator>(world, std::chrono::seconds(e.distributed.timeout_secs), context.device);
    // Every rank must run the same experiment with the same plugins (names,
    // versions, fingerprints: paths may differ across machines).
    std::vector<std::string> libraries;
    for (const auto& lib : registry.libraries()) libraries.push_back(lib->name + " " + lib->version + " " + lib->fingerprint);
    std::sort(libraries.begin(), libraries.end());
    const std::string same = "expected every rank to run the same experiment with the same plugins";
    const std::string how = "launch every rank with the same experiment, --set values and plugin folders";
    comm->check_same("experiment (resolved config)", fingerprint_of(rank_comparable_config(e)), same, how);
    comm->check_same("plugin set", fingerprint_of(join(libraries, "\n")), same, how);
    if (e.loop.precision == "auto")
      comm->check_same("loop.precision auto", e.loop.effective_precision() + ": " + e.loop.precision_reason,
                       "expected every rank to choose the same precision (auto decides from each machine's CPU or GPU)",
                       "set loop.precision to fp32 or bf16-mixed when the machines differ", /*show_values=*/true);
    if (context.device.is_cuda()) check_one_gpu_per_rank(*comm, world, context.device);
  }
  context.run_dir = run_dir;
  context.collectives = comm ? &comm->collectives() : nullptr;
  context.sync_batch_norm = e.distributed.sync_batch_norm;
}

Experiment load_experiment(const std::string& file, const std::vector<std::string>& sets,
                           const std::vector<std::string>& plugin_dirs, Registry& registry) {
  ExperimentSource source = read_experiment(file, sets);
  load_plugin_folders(plugin_search_path(experiment_plugin_dirs(source), plugin_dirs), registry);
  Experiment e = validate_experiment(std::move(source), registry);
  resolve_precision(e);
  return e;
}

}  // namespace trainyard::host
