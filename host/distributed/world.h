#pragma once
// Which process of a run this is, and how to reach the others.
#include <string>

#include "config/experiment.h"

namespace trainyard::host {

struct World {
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string rendezvous = "tcp";  ///< tcp (TCPStore on master_addr:master_port) or file (FileStore)
  std::string rendezvous_file;     ///< for rendezvous: file
  std::string launched_by = "a single process";
  bool distributed() const { return world_size > 1; }
};

/// From the environment: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
/// MASTER_ADDR, MASTER_PORT (trainyard's launcher, torchrun --no-python), or
/// SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (srun); the master address and
/// port from the environment, else the experiment's distributed section.
/// Throws ConfigError for malformed values.
World detect_world(const Experiment& experiment);

}  // namespace trainyard::host
