#include "distributed/world.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <thread>

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

// A step's variable, else the job's (srun sets both; a batch script the job's).
const char* step_or_job(const char* step, const char* job) {
  const char* value = std::getenv(step);
  return value ? value : std::getenv(job);
}

}  // namespace

std::vector<int> slurm_tasks_per_node(const std::string& text) {
  std::vector<int> out;
  static const std::regex item(R"((\d+)(\(x(\d+)\))?)");
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::smatch m;
    const std::string part = text.substr(start, comma - start);
    if (!std::regex_match(part, m, item))
      throw ConfigError("environment: SLURM_TASKS_PER_NODE='" + text + "'",
                        "expected counts like 2(x3),1 (tasks per node, repeated)", "");
    const int count = std::stoi(m[1]), repeat = m[3].matched ? std::stoi(m[3]) : 1;
    out.insert(out.end(), static_cast<size_t>(repeat), count);
    start = comma + 1;
  }
  return out;
}

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry (commas inside brackets belong to ranges), each bracket
  // replaced by the first number of its first range, zero padding kept.
  std::string host;
  for (size_t i = 0; i < nodelist.size(); ++i) {
    const char ch = nodelist[i];
    if (ch == ',') break;
    if (ch != '[') {
      host += ch;
      continue;
    }
    const size_t close = nodelist.find(']', i);
    if (close == std::string::npos) break;
    const std::string ranges = nodelist.substr(i + 1, close - i - 1);
    host += ranges.substr(0, ranges.find_first_of(",-"));
    i = close;
  }
  if (host.empty() || host.find_first_of("[]") != std::string::npos ||
      std::count(nodelist.begin(), nodelist.end(), '[') != std::count(nodelist.begin(), nodelist.end(), ']'))
    throw ConfigError("environment: SLURM_JOB_NODELIST='" + nodelist + "'",
                      "expected a Slurm node list like node[01-04],gpu7", "");
  return host;
}

int threads_for(const World& world, int64_t threads_per_process) {
  if (threads_per_process > 0) return static_cast<int>(threads_per_process);
  if (world.cpus_per_task > 0) return world.cpus_per_task;
  cpu_set_t mask;
  int cpus = static_cast<int>(std::thread::hardware_concurrency());
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) cpus = CPU_COUNT(&mask);
  if (world.cpus_bound) return std::max(1, cpus);
  return std::max(1, cpus / std::max(1, world.local_world_size));
}

int slurm_port(int job_id) { return 20000 + job_id % 20000; }

std::optional<SlurmStep> slurm_step() {
  int step_id = 0;
  if (!env_int("SLURM_STEP_ID", step_id) && !env_int("SLURM_STEPID", step_id)) return std::nullopt;
  SlurmStep step;
  if (!env_int("SLURM_STEP_NUM_TASKS", step.tasks)) env_int("SLURM_NTASKS", step.tasks);
  if (!env_int("SLURM_STEP_NUM_NODES", step.nodes) && !env_int("SLURM_NNODES", step.nodes))
    env_int("SLURM_JOB_NUM_NODES", step.nodes);
  env_int("SLURM_NODEID", step.node_id);
  env_int("SLURM_JOB_ID", step.job_id);
  if (const char* nodes = step_or_job("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"))
    step.first_host = first_slurm_host(nodes);
  return step;
}

World detect_world(const StoreSettings& store) {
  World w;
  w.master_addr = store.master_addr;
  w.master_port = store.master_port;
  w.rendezvous = store.rendezvous;
  w.rendezvous_file = store.rendezvous_file;
  if (env_int("WORLD_SIZE", w.world_size)) {
    if (!env_int("RANK", w.rank))
      throw ConfigError("environment: WORLD_SIZE is set but RANK is not", "expected both", "");
    env_int("LOCAL_RANK", w.local_rank);
    if (!env_int("LOCAL_WORLD_SIZE", w.local_world_size)) w.local_world_size = w.world_size;
    w.launched_by =
        std::getenv("TRAINYARD_LAUNCHER") ? "trainyard --nproc-per-node" : "the RANK/WORLD_SIZE environment";
  } else if (const std::optional<SlurmStep> step = slurm_step()) {
    // srun's tasks are the ranks. What Slurm always sets: srun -n2 sets no
    // SLURM_NTASKS_PER_NODE.
    w.world_size = step->tasks;
    env_int("SLURM_PROCID", w.rank);
    env_int("SLURM_LOCALID", w.local_rank);
    if (const char* per_node = step_or_job("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")) {
      const std::vector<int> tasks = slurm_tasks_per_node(per_node);
      w.local_world_size = tasks.at(std::min<size_t>(static_cast<size_t>(step->node_id), tasks.size() - 1));
    } else if (!env_int("SLURM_NTASKS_PER_NODE", w.local_world_size)) {
      w.local_world_size = 1;
    }
    env_int("SLURM_CPUS_PER_TASK", w.cpus_per_task);
    const char* bind = std::getenv("SLURM_CPU_BIND_TYPE");
    w.cpus_bound = bind && *bind && std::string(bind).rfind("none", 0) != 0;
    // Rank 0 runs on the step's first node; a port from the job id keeps two
    // jobs sharing a node apart (MASTER_ADDR and MASTER_PORT still win).
    if (!step->first_host.empty()) w.master_addr = step->first_host;
    if (step->job_id > 0) w.master_port = slurm_port(step->job_id);
    w.launched_by = "Slurm";
  } else if (const char* job = std::getenv("SLURM_JOB_ID");
             job && env_int("SLURM_NTASKS", w.world_size) && w.world_size > 1) {
    throw ConfigError("Slurm job " + std::string(job) + " has " + std::to_string(w.world_size) +
                          " tasks, but this process was not started by srun (no SLURM_STEP_ID: it is the job's "
                          "batch script or an salloc shell)",
                      "expected srun to start one process per rank: `srun trainyard run EXPERIMENT` in the script",
                      "or pass --nproc-per-node N to start N ranks on this node yourself");
  } else {
    w.world_size = 1;
  }
  if (const char* addr = std::getenv("MASTER_ADDR")) w.master_addr = addr;
  const bool port_from_environment = env_int("MASTER_PORT", w.master_port);
  // As torch.distributed decides (rendezvous.py, _agent_store_serves): the
  // flag promises a server only at the agent's own MASTER_ADDR:MASTER_PORT.
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (agent && std::string(agent) == "True" && std::getenv("MASTER_ADDR") && port_from_environment &&
      w.rendezvous == "tcp") {
    w.agent_store = true;
    w.launched_by = "torchrun";
  } else if (std::getenv("TORCHELASTIC_RUN_ID") && w.launched_by == "the RANK/WORLD_SIZE environment") {
    w.launched_by = "torchrun";
  }
  env_int("TORCHELASTIC_RESTART_COUNT", w.attempt);
  if (w.world_size < 1 || w.rank >= w.world_size)
    throw ConfigError("environment: rank " + std::to_string(w.rank) + " of world size " + std::to_string(w.world_size),
                      "expected 0 <= rank < world size", "check how the processes were launched");
  if (w.rendezvous == "file" && w.rendezvous_file.empty())
    throw ConfigError(store.rendezvous_file_where + ": rendezvous: file needs a file",
                      "expected distributed.rendezvous_file: a path all ranks can reach", "");
  return w;
}

}  // namespace trainyard::host
