#pragma once
// Who starts a run's ranks: this process (--nproc-per-node, or the
// experiment's num_gpus/num_cpus above 1), torchrun, or Slurm's srun; one
// launcher, never two, never silently ignored.
#include <optional>
#include <string>
#include <vector>

#include "config/sections.h"

namespace trainyard::host {

/// What every trainyard process sets first, before any thread exists (NCCL's
/// environment: distributed/communicator.h). main() calls it.
void prepare_process_environment();

/// What the command line asked of the launcher; an empty field was not given.
struct LaunchRequest {
  std::optional<int> nproc_per_node;          ///< empty: the experiment's num_gpus or num_cpus
  std::optional<int> nnodes;                  ///< empty: 1, or the Slurm step's nodes
  std::optional<int> node_rank;               ///< empty: 0, or this Slurm node's index
  std::optional<std::string> master_addr;     ///< empty: 127.0.0.1, or the Slurm step's first host
  int master_port = 0;                        ///< 0: a free port (one node), or one from the Slurm job id
  std::vector<std::string> worker_arguments;  ///< argv[1..] without the launcher's flags
};

/// Starts the worker processes when asked and this process is not a rank
/// already (WORLD_SIZE set, or one of several srun tasks on its node);
/// returns the launcher's exit code then, nullopt when this process is to
/// run the experiment itself. Throws ConfigError when two launchers would
/// start the ranks or the flags do not fit together. `distributed`: the
/// experiment's section (num_gpus, num_cpus: the ranks per node by default).
std::optional<int> launch_if_asked(const LaunchRequest& request, const DistributedConfig& distributed);

}  // namespace trainyard::host
