#include "run/session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <unistd.h>

#include <map>
#include <set>

#include "config/snapshot.h"
#include "distributed/device.h"
#include "log/log.h"
#include "plugins/library_loader.h"
#include "train/precision.h"
#include "trainyard/error.h"
#include "trainyard/version.h"
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
// see index 0, so the physical GPUs are compared. Under the test setting
// TRAINYARD_TEST_SHARED_GPU sharing is allowed: rank 0 says once which ranks
// share which GPU, and why.
void check_gpus_of_ranks(Communicator& comm, const World& world, c10::Device device) {
  const auto gpu = gpu_facts(device.index());
  if (!gpu) return;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::vector<std::string> used = comm.exchange(std::string(host) + " " + gpu->uuid);
  if (!ranks_share_gpu_for_tests()) {
    for (int r = 0; r < world.world_size; ++r)
      for (int q = 0; q < r; ++q)
        if (used[r] == used[q])
          throw ConfigError("distributed.num_gpus: ranks " + std::to_string(q) + " and " + std::to_string(r) +
                                " both train on GPU " + used[r] + " (" + gpu->name + ")",
                            "expected one GPU per rank",
                            "start as many processes per node as it has GPUs, or give each rank its own "
                            "(CUDA_VISIBLE_DEVICES, Slurm's --gpus-per-task=1)");
    return;
  }
  if (world.rank != 0) return;
  std::map<std::string, std::vector<int>> ranks_on;
  for (int r = 0; r < world.world_size; ++r) ranks_on[used[r]].push_back(r);
  for (const auto& [where, ranks] : ranks_on) {
    if (ranks.size() < 2) continue;
    std::string list;
    for (size_t i = 0; i < ranks.size(); ++i)
      list += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
    const std::string host_name = where.substr(0, where.rfind(' ')), uuid = where.substr(where.rfind(' ') + 1);
    InfoLine()
        << "trainyard: " << ranks.size() << " ranks (" << list << ") share GPU " << uuid << " on " << host_name
        << (where == used[0] ? " (rank 0's " + device.str() + ", " + gpu->name + ")" : std::string())
        << " over Gloo, because the test setting "
        << "TRAINYARD_TEST_SHARED_GPU=1 is set (collectives staged through host memory: slow; never for real runs)\n";
  }
}

}  // namespace

namespace {
// This rank's training device: cuda:(distributed.first_gpu_id + local rank)
// when the experiment trains on GPUs, else the CPU. Throws ConfigError when
// LibTorch has no CUDA, the index is past the GPUs this process sees, or a
// stage asks bf16 of a GPU without native bfloat16.
c10::Device rank_device(const Experiment& e, const World& world) {
  if (e.distributed.num_gpus <= 0) return c10::Device(c10::DeviceType::CPU);
  const std::string where = e.where("distributed.num_gpus");
  const int64_t visible = torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  if (visible == 0)
    throw ConfigError(
        where + ": GPUs requested but " +
            (std::string(TRAINYARD_CUDA) == "none" ? "this LibTorch has no CUDA" : "this process sees no CUDA device"),
        "expected num_gpus: 0 on this machine, got " + std::to_string(e.distributed.num_gpus),
        "set distributed.num_gpus: 0 to train on the CPU");
  const int64_t index = gpu_index_for(e.distributed.first_gpu_id, world.local_rank, visible);
  if (index < 0)
    throw ConfigError(e.where("distributed.first_gpu_id") + ": local rank " + std::to_string(world.local_rank) +
                          " would use GPU " + std::to_string(e.distributed.first_gpu_id + world.local_rank),
                      "expected first_gpu_id + local rank < " + std::to_string(visible) + " (the GPUs visible here)",
                      "start at most " + std::to_string(std::max<int64_t>(visible - e.distributed.first_gpu_id, 0)) +
                          " processes per node, or check CUDA_VISIBLE_DEVICES");
  // bfloat16 arithmetic needs compute capability 8.0 (Ampere) or newer.
  if (const std::optional<GpuFacts> gpu = gpu_facts(index)) {
    std::vector<const Experiment*> all{&e};
    for (const auto& stage : e.stages) all.push_back(&stage);
    for (const Experiment* x : all)
      if (x->loop.effective_precision() == "bf16-mixed" && gpu->major < 8)
        throw ConfigError(
            e.where("loop.precision") + ": bf16-mixed needs a GPU of compute capability 8.0 or newer (native bfloat16)",
            "expected fp32 or fp16-mixed on GPU " + std::to_string(index) + " (" + gpu->name + ", " +
                std::to_string(gpu->major) + "." + std::to_string(gpu->minor) + "), got bf16-mixed",
            "use precision: fp16-mixed on this GPU");
  }
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index));
}

// The experiment's distributed section as the world's defaults for rank 0's
// store (the environment overrides them); `rendezvous_file_where` names the
// key in errors.
StoreSettings store_settings(const DistributedConfig& distributed, const std::string& rendezvous_file_where) {
  StoreSettings store;
  store.master_addr = distributed.master_addr;
  store.master_port = static_cast<int>(distributed.master_port);
  store.rendezvous = distributed.rendezvous;
  store.rendezvous_file = distributed.rendezvous_file;
  store.rendezvous_file_where = rendezvous_file_where;
  return store;
}
}  // namespace

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
    : world(detect_world(store_settings(e.distributed, e.where("distributed.rendezvous_file")))),
      context(make_context(e, world)) {
  set_log_rank(world.rank, world.world_size);
  if (world.distributed()) {
    comm = std::make_unique<Communicator>(world, std::chrono::seconds(e.distributed.timeout_secs), context.device);
    // Every rank must run the same experiment with the same plugins (names,
    // versions, fingerprints: paths may differ across machines).
    std::vector<std::string> libraries;
    for (const auto& lib : registry.libraries())
      libraries.push_back(lib->name + " " + lib->version + " " + lib->fingerprint);
    std::sort(libraries.begin(), libraries.end());
    const std::string same = "expected every rank to run the same experiment with the same plugins";
    const std::string how = "launch every rank with the same experiment, --set values and plugin folders";
    comm->check_same("experiment (resolved config)", fingerprint_of(ExperimentSnapshot(e).rank_comparable()), same,
                     how);
    comm->check_same("plugin set", fingerprint_of(join(libraries, "\n")), same, how);
    if (e.loop.precision == "auto")
      comm->check_same("loop.precision auto", e.loop.effective_precision() + ": " + e.loop.precision_reason,
                       "expected every rank to choose the same precision (auto decides from each machine's CPU or GPU)",
                       "set loop.precision to fp32 or bf16-mixed when the machines differ", /*show_values=*/true);
    if (context.device.is_cuda()) check_gpus_of_ranks(*comm, world, context.device);
  }
  context.run_dir = run_dir;
  context.collectives = comm ? &comm->collectives() : nullptr;
  context.sync_batch_norm = e.distributed.sync_batch_norm;
}

}  // namespace trainyard::host
