#pragma once
// Which process of a run this is, and how to reach the others.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trainyard::host {

struct World {
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string rendezvous = "tcp";  ///< tcp (TCPStore on master_addr:master_port) or file (FileStore)
  std::string rendezvous_file;     ///< for rendezvous: file
  std::string launched_by = "a single process";
  /// torchrun's agent already serves a TCPStore at MASTER_ADDR:MASTER_PORT
  /// (TORCHELASTIC_USE_AGENT_STORE=True, its static rendezvous): every rank,
  /// rank 0 included, connects to it as a client instead of binding the port.
  bool agent_store = false;
  /// torchrun's restart count (TORCHELASTIC_RESTART_COUNT): its agent's store
  /// outlives a restart, so each attempt keeps its keys apart.
  int attempt = 0;
  /// CPUs this process may use (SLURM_CPUS_PER_TASK); 0: not given.
  int cpus_per_task = 0;
  /// Slurm bound this task to its own CPUs (SLURM_CPU_BIND_TYPE): its
  /// affinity mask is its share already, not the node's.
  bool cpus_bound = false;
  bool distributed() const { return world_size > 1; }
};

/// Where rank 0's store is when the environment does not say: the
/// experiment's distributed section (run/ fills it in).
struct StoreSettings {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string rendezvous = "tcp";  ///< tcp or file
  std::string rendezvous_file;
  /// Where the rendezvous file is set, as errors name it ("exp.yaml:12: distributed.rendezvous_file").
  std::string rendezvous_file_where = "distributed.rendezvous_file";
};

/// From the environment: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
/// MASTER_ADDR, MASTER_PORT (trainyard's launcher, torchrun --no-python), or
/// SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID in an srun step (rank 0's
/// address from the node list, a port from the job id); MASTER_ADDR and
/// MASTER_PORT from the environment win, else `store`. A Slurm job's batch
/// script with several tasks but no srun step is refused (ConfigError): its
/// one process is not a rank.
/// Under torchrun, TORCHELASTIC_USE_AGENT_STORE=True with MASTER_ADDR and
/// MASTER_PORT set means the agent hosts the store (agent_store).
/// Throws ConfigError for malformed values.
World detect_world(const StoreSettings& store);

/// A task of an srun step (SLURM_STEP_ID set): how many tasks and nodes
/// the step has, this task's node, the step's first host and the job.
struct SlurmStep {
  int tasks = 1, nodes = 1, node_id = 0, job_id = 0;
  std::string first_host;
};
/// The srun step this process is a task of, if any. Not in a job's batch
/// script or an salloc shell (they have SLURM_JOB_ID but no step).
std::optional<SlurmStep> slurm_step();
/// A port for rank 0's store that differs between jobs sharing a node.
int slurm_port(int job_id);

/// SLURM_TASKS_PER_NODE ("2(x3),1") expanded to tasks per node ([2, 2, 2, 1]).
/// Throws ConfigError for another form.
std::vector<int> slurm_tasks_per_node(const std::string& text);
/// The first host of a Slurm node list: "node[01-03,07],gpu1" -> "node01",
/// "rack[1-2]-n[3-4]" -> "rack1-n3". Throws ConfigError for an empty or
/// unbalanced list.
std::string first_slurm_host(const std::string& nodelist);
/// The intra-op threads for a process: threads_per_process when set, else
/// the CPUs Slurm gives the task (SLURM_CPUS_PER_TASK, or the CPUs it bound
/// the task to), else the CPUs this process may run on (its affinity mask)
/// shared among the processes on the node.
int threads_for(const World& world, int64_t threads_per_process);

}  // namespace trainyard::host
