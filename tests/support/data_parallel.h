#pragma once
// Helpers for data-parallel tests (CPU ranks over Gloo, GPU ranks over NCCL).
#include <string>
#include <vector>

#include "support/support.h"

namespace trainyard::test {

/// The file of the synthetic experiment sized for data parallel: 1280 samples, 20 steps of
/// a global batch of 64 in one epoch, no dropout (ranks draw other random
/// numbers than one process would), a 20 s collective timeout.
std::string dp_experiment(const std::string& name, const std::string& more = "");

/// A port unlikely to be taken by a parallel test.
int free_port();

/// Starts `world` ranks as torchrun would (RANK, WORLD_SIZE, LOCAL_RANK,
/// MASTER_*), `extra[r]` appended to rank r's arguments; waits for all.
std::vector<CommandResult> launch_by_environment(const std::string& args, int world,
                                                 const std::vector<std::string>& extra = {});

/// Rank r's log file in RUN_DIR (trainyard.log for rank 0): everything it
/// logged, while the console shows rank 0's lines only.
inline std::string rank_log(const std::string& run_dir, int rank) {
  return read_file(run_dir +
                   (rank == 0 ? std::string("/trainyard.log") : "/trainyard-rank" + std::to_string(rank) + ".log"));
}

/// Every value of "KEY": in a metrics.jsonl, in order.
std::vector<double> series(const std::string& metrics, const std::string& key);

/// The checkpoint after the 20 steps of dp_experiment.
inline const char* kLastDpCheckpoint = "ckpt-e0001-i00000020.pt";

/// dp_experiment trained by one process with the global batch of 64.
struct DpReference {
  std::string run_dir;
  DpReference();
};
/// A data-parallel run of dp_experiment (2 ranks of 32) ended where the one
/// process did: weights, the training loss series and the test meters.
void expect_equal_to_single(const std::string& run_dir, const DpReference& single);

}  // namespace trainyard::test
