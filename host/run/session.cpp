#include "run/session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include <ATen/Parallel.h>

#include "config/snapshot.h"
#include "distributed/device.h"
#include "log/log.h"
#include "plugins/loader.h"
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
  }
  context.run_dir = run_dir;
  context.collectives = comm ? &comm->collectives() : nullptr;
  context.sync_batch_norm = e.distributed.sync_batch_norm;
}

Experiment load_experiment(const std::string& file, const std::vector<std::string>& sets,
                           const std::vector<std::string>& plugin_dirs, Registry& registry) {
  ExperimentSource source = read_experiment(file, sets);
  load_plugin_folders(plugin_search_path(experiment_plugin_dirs(source), plugin_dirs), registry);
  return validate_experiment(std::move(source), registry);
}

}  // namespace trainyard::host
