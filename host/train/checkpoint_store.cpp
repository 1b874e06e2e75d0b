#include "train/checkpoint_store.h"

#include <algorithm>
#include <filesystem>

#include "trainyard/error.h"
#include "util/files.h"

namespace fs = std::filesystem;

namespace trainyard::host {

CheckpointStore::CheckpointStore(std::string dir, int64_t keep) : dir_(std::move(dir)), keep_(keep) {}

std::string CheckpointStore::path_of(const LoopPosition& at) const {
  return (fs::path(dir_) / checkpoint_file_name(at)).string();
}

std::vector<std::string> CheckpointStore::list() const { return list_checkpoints(dir_); }

std::vector<std::string> CheckpointStore::remove_stale_temporaries() const {
  return host::remove_stale_temporaries(dir_);
}

std::string CheckpointStore::save(Network& network, torch::optim::Optimizer& optimizer, const CheckpointState& state,
                                  const std::vector<const CheckpointPart*>& parts) const {
  const std::string path = path_of(state.at);
  fs::create_directories(dir_);
  try {
    save_checkpoint(path, network, optimizer, state, parts);
  } catch (const Error& err) {
    // The temporary file is gone; the older checkpoints are as they were.
    auto kept = list();
    kept.erase(std::remove(kept.begin(), kept.end(), path), kept.end());
    throw Error(std::string("checkpoint not written: ") + err.what() + "; " +
                (kept.empty() ? std::string("there is no earlier checkpoint")
                              : "the previous checkpoint " + kept.back() + " is intact"));
  }
  prune_checkpoints(dir_, keep_);
  return path;
}

void CheckpointStore::keep_as_best(const LoopPosition& at) const {
  const std::string latest = path_of(at);
  const std::string best = (fs::path(dir_) / "best.pt").string();
  if (!fs::exists(latest)) return;
  replace_file_atomic(best, [&](const std::string& tmp) { fs::copy_file(latest, tmp, fs::copy_options::overwrite_existing); });
  replace_file_atomic(manifest_path(best), [&](const std::string& tmp) {
    fs::copy_file(manifest_path(latest), tmp, fs::copy_options::overwrite_existing);
  });
}

}  // namespace trainyard::host
