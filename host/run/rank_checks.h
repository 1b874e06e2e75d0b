#pragma once
// What the ranks of a data-parallel run check together before anything is
// written: that they share the output folder, and that they see the run lock
// rank 0 takes. A single-process run takes the lock alone.
#include <filesystem>
#include <memory>
#include <string>

#include "run/run_lock.h"

namespace trainyard::host {

class Communicator;

/// Rank 0 writes checkpoints and every rank resumes from them, so the ranks
/// must share the output folder: rank 0 leaves a token in `folder` and the
/// others read it back. Throws ConfigError naming the rank that does not see
/// it (ranks on several machines need a network file system).
void check_shared_output(Communicator& comm, int rank, const std::filesystem::path& folder);

/// Rank 0 takes `run_dir`'s lock (null on the other ranks); every rank learns
/// whether it did and checks that it sees that lock (the same host and PID in
/// the record). `comm` null: one process. Throws ConfigError naming the
/// holder, or the rank that sees another lock.
std::unique_ptr<RunLock> take_run_lock(Communicator* comm, int rank, const std::string& run_dir);

}  // namespace trainyard::host
