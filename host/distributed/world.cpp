#include "distributed/world.h"

#include <cstdlib>

#include "trainyard/error.h"

namespace trainyard::host {
namespace {

bool env_int(const char* name, int& out) {
  const char* text = std::getenv(name);
  if (!text) return false;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 0)
    throw ConfigError(std::string("environment: ") + name + "='" + text + "'", "expected a non-negative integer", "");
  out = static_cast<int>(v);
  return true;
}

}  // namespace

World detect_world(const Experiment& e) {
  World w;
  w.master_addr = e.distributed.master_addr;
  w.master_port = static_cast<int>(e.distributed.master_port);
  w.rendezvous = e.distributed.rendezvous;
  w.rendezvous_file = e.distributed.rendezvous_file;
  if (env_int("WORLD_SIZE", w.world_size)) {
    if (!env_int("RANK", w.rank)) throw ConfigError("environment: WORLD_SIZE is set but RANK is not", "expected both", "");
    env_int("LOCAL_RANK", w.local_rank);
    if (!env_int("LOCAL_WORLD_SIZE", w.local_world_size)) w.local_world_size = w.world_size;
    w.launched_by = std::getenv("TRAINYARD_LAUNCHER") ? "trainyard --nproc-per-node" : "the RANK/WORLD_SIZE environment";
  } else if (env_int("SLURM_NTASKS", w.world_size)) {
    env_int("SLURM_PROCID", w.rank);
    env_int("SLURM_LOCALID", w.local_rank);
    if (!env_int("SLURM_NTASKS_PER_NODE", w.local_world_size)) w.local_world_size = 1;
    w.launched_by = "Slurm";
  }
  if (const char* addr = std::getenv("MASTER_ADDR")) w.master_addr = addr;
  env_int("MASTER_PORT", w.master_port);
  if (w.world_size < 1 || w.rank >= w.world_size)
    throw ConfigError("environment: rank " + std::to_string(w.rank) + " of world size " + std::to_string(w.world_size),
                      "expected 0 <= rank < world size", "check how the processes were launched");
  if (w.rendezvous == "file" && w.rendezvous_file.empty())
    throw ConfigError(e.where("distributed.rendezvous_file") +
                          ": rendezvous: file needs a file",
                      "expected distributed.rendezvous_file: a path all ranks can reach", "");
  return w;
}

}  // namespace trainyard::host
