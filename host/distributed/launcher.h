#pragma once
// `trainyard run EXP.yaml --nproc-per-node N`: starts N worker processes of
// this same executable (fork + exec, so no LibTorch thread pool is inherited),
// forwards their output with a "[rank R] " prefix, and stops all of them as
// soon as one fails.
#include <string>
#include <vector>

namespace trainyard::host {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  ///< 0: a free port (single node only)
};

/// Runs the workers with `worker_args` (argv without the launcher options)
/// and returns the exit code: 0 if all succeeded, else the first failure's.
int launch_workers(const LaunchOptions& options, const std::vector<std::string>& worker_args);

}  // namespace trainyard::host
