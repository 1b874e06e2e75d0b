#include "run/launch.h"

#include <cstdlib>
#include <iostream>

#include "distributed/communicator.h"
#include "distributed/launcher.h"
#include "distributed/world.h"
#include "trainyard/error.h"

namespace trainyard::host {

void prepare_process_environment() { configure_nccl_environment(); }

std::optional<int> launch_if_asked(const LaunchRequest& request, const DistributedConfig& distributed) {
  // Who starts the ranks: one launcher, never two, never silently ignored.
  const bool flag = request.nproc_per_node.has_value();
  const int devices = static_cast<int>(distributed.num_gpus > 0 ? distributed.num_gpus : distributed.num_cpus);
  const int wanted = request.nproc_per_node.value_or(devices);
  if (const char* world_size = std::getenv("WORLD_SIZE")) {
    // Started as a rank by torchrun or another launcher (ours strips its flags).
    if (flag)
      throw ConfigError("command line: --nproc-per-node " + std::to_string(wanted) +
                            " in a process already started as a rank (WORLD_SIZE=" + world_size + ")",
                        "expected one launcher to start the ranks: torchrun or --nproc-per-node, not both",
                        "drop --nproc-per-node; torchrun's own --nproc-per-node says how many ranks per node");
    return std::nullopt;
  }
  LaunchOptions launch;
  launch.nproc_per_node = wanted;
  launch.nnodes = request.nnodes.value_or(launch.nnodes);
  launch.node_rank = request.node_rank.value_or(launch.node_rank);
  launch.master_addr = request.master_addr.value_or(launch.master_addr);
  launch.master_port = request.master_port;
  if (const std::optional<SlurmStep> step = slurm_step()) {
    if (step->tasks > step->nodes) {
      // srun started several tasks on a node: they are the ranks.
      if (flag)
        throw ConfigError("command line: --nproc-per-node " + std::to_string(wanted) + " inside a Slurm step of " +
                              std::to_string(step->tasks) + " tasks on " + std::to_string(step->nodes) +
                              " node(s): srun already started the ranks",
                          "expected srun to start the ranks (srun -n N trainyard run ...) or one task per node "
                          "that starts them (srun --ntasks-per-node=1 trainyard run ... --nproc-per-node N)",
                          "drop --nproc-per-node, or run one task per node");
      return std::nullopt;
    }
    if (wanted <= 1) return std::nullopt;  // one rank per node: srun's tasks
    // One task per node, which starts the node's ranks: the nodes, this
    // node's place and rank 0's address come from Slurm unless given.
    if (!request.nnodes) launch.nnodes = step->nodes;
    if (!request.node_rank) launch.node_rank = step->node_id;
    if (launch.nnodes > 1 && !request.master_addr && !step->first_host.empty()) launch.master_addr = step->first_host;
    if (launch.nnodes > 1 && launch.master_port == 0 && step->job_id > 0) launch.master_port = slurm_port(step->job_id);
    std::cout << "trainyard: Slurm step of " << step->tasks << " task(s): starting " << wanted
              << " ranks on this node (node " << launch.node_rank << " of " << launch.nnodes << ")" << std::endl;
  } else if (!flag && devices <= 1) {
    return std::nullopt;
  }
  if (launch.nproc_per_node < 1 || launch.nnodes < 1 || launch.node_rank < 0 || launch.node_rank >= launch.nnodes)
    throw ConfigError("command line: --nproc-per-node " + std::to_string(launch.nproc_per_node) + ", --nnodes " +
                          std::to_string(launch.nnodes) + ", --node-rank " + std::to_string(launch.node_rank),
                      "expected N >= 1, M >= 1 and 0 <= R < M", "");
  if (launch.nnodes > 1 && launch.master_port == 0)
    throw ConfigError("command line: --nnodes " + std::to_string(launch.nnodes) + " without --master-port",
                      "expected the same --master-addr and --master-port on every node", "");
  return launch_workers(launch, request.worker_arguments);
}

}  // namespace trainyard::host
