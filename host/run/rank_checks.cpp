#include "run/rank_checks.h"

#include <unistd.h>

#include <random>
#include <vector>

#include "distributed/communicator.h"
#include "trainyard/error.h"
#include "util/files.h"

namespace fs = std::filesystem;

namespace trainyard::host {

void check_shared_output(Communicator& comm, int rank, const fs::path& folder) {
  std::string token, token_file, rank0_failure;
  if (rank == 0) {
    std::random_device random;
    token = std::to_string(random()) + std::to_string(random()) + "-" + std::to_string(::getpid());
    token_file = (folder / (".trainyard-shared-" + token)).string();
    try {
      fs::create_directories(folder);
      write_file_atomic(token_file, token);
    } catch (const std::exception& e) {
      rank0_failure = e.what();
    }
  }
  // Rank 0 says where it wrote which token (or that it could not).
  const std::vector<std::string> from_zero = comm.exchange(rank != 0               ? ""
                                                           : rank0_failure.empty() ? token + "\n" + folder.string()
                                                                                   : "\n" + rank0_failure);
  const size_t newline = from_zero[0].find('\n');
  const std::string zero_token = from_zero[0].substr(0, newline), zero_said = from_zero[0].substr(newline + 1);
  if (zero_token.empty())
    throw ConfigError("output folder " + folder.string() + ": rank 0 cannot write there (" + zero_said + ")",
                      "expected a writable output folder shared by every rank", "");
  std::string seen = "ok";
  if (rank != 0) {
    const fs::path expected_file = folder / (".trainyard-shared-" + zero_token);
    std::error_code ec;
    if (!fs::exists(expected_file, ec))
      seen = "it found no " + expected_file.filename().string() + " in " + folder.string();
    else if (read_lines(expected_file.string()) != std::vector<std::string>{zero_token})
      seen = "it found another token in " + expected_file.string();
  }
  const std::vector<std::string> seen_by = comm.exchange(seen);
  if (rank == 0) {
    std::error_code ignored;
    fs::remove(token_file, ignored);
  }
  for (size_t r = 1; r < seen_by.size(); ++r)
    if (seen_by[r] != "ok")
      throw ConfigError("output folder " + zero_said + ": rank " + std::to_string(r) +
                            " does not see the folder rank 0 writes (rank 0 left a token there; " + seen_by[r] + ")",
                        "expected one output folder shared by every rank: rank 0 writes the run directory and "
                        "checkpoints, and every rank resumes from them",
                        "point --output-dir (or output.dir) at a folder every machine mounts, e.g. on NFS");
}

std::unique_ptr<RunLock> take_run_lock(Communicator* comm, int rank, const std::string& run_dir) {
  std::unique_ptr<RunLock> lock;
  std::string refusal;
  if (rank == 0) {
    try {
      lock = RunLock::acquire(run_dir);
    } catch (const ConfigError& e) {
      refusal = e.what();
    }
  }
  if (!comm) {
    if (!refusal.empty()) throw ConfigError(refusal);
    return lock;
  }
  auto who = [](const LockHolder& h) { return h.host + ":" + std::to_string(h.pid); };
  const std::string zero = comm->exchange(rank != 0         ? ""
                                          : refusal.empty() ? "held\n" + who(lock->holder())
                                                            : "refused\n" + refusal)[0];
  const size_t newline = zero.find('\n');
  if (zero.substr(0, newline) == "refused") throw ConfigError(zero.substr(newline + 1));
  std::string seen = "ok";
  if (rank != 0 && who(read_lock_holder(run_lock_path(run_dir))) != zero.substr(newline + 1))
    seen = "its " + run_lock_path(run_dir) + " does not name rank 0's process " + zero.substr(newline + 1);
  const std::vector<std::string> seen_by = comm->exchange(seen);
  for (size_t r = 1; r < seen_by.size(); ++r)
    if (seen_by[r] != "ok")
      throw ConfigError(
          run_dir + ": rank " + std::to_string(r) + " does not see the run lock rank 0 holds (" + seen_by[r] + ")",
          "expected every rank to see one run directory and its lock",
          "point --output-dir (or output.dir) at a folder every machine mounts");
  return lock;
}

}  // namespace trainyard::host
