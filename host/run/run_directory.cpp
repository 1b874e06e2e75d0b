#include "run/run_directory.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "config/snapshot.h"
#include "log/log.h"
#include "run/provenance.h"
#include "trainyard/error.h"
#include "util/files.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

std::string timestamp() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

}  // namespace

void RunDirectory::check_writable() const {
  // access() also says EROFS for a read-only file system.
  for (const fs::path& dir : {fs::path(path_), fs::path(path_) / "checkpoints"}) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec) || ::access(dir.c_str(), W_OK | X_OK) == 0) continue;
    const int err = errno;
    throw ConfigError(dir.string() + ": the run directory is not writable (" + std::strerror(err) + ")",
                      "expected a run directory this user can write: resuming writes checkpoints and appends to "
                      "metrics.jsonl",
                      "make it writable (its permissions, or a read-only mount), or copy the run and pass --output-dir "
                      "with the copy's folder");
  }
}

void RunDirectory::write(const Experiment& experiment, bool fresh, const nlohmann::ordered_json& provenance) {
  if (fresh && fs::exists(path_)) {
    std::string kept = path_ + ".replaced-" + timestamp();
    for (int n = 2; fs::exists(kept); ++n) kept = path_ + ".replaced-" + timestamp() + "-" + std::to_string(n);
    fs::rename(path_, kept);
    kept_previous_ = kept;
    InfoLine() << "trainyard: --fresh: previous run kept in " << kept << "\n";
  }
  made_ = !fs::exists(path_);
  fs::create_directories(path_);
  write_file_atomic((fs::path(path_) / "config.yaml").string(), ExperimentSnapshot(experiment).yaml());
  write_file_atomic((fs::path(path_) / "config.json").string(), ExperimentSnapshot(experiment).json());
  record_provenance(path_, provenance);
}

void RunDirectory::undo_if_new(bool has_checkpoints) {
  if (!made_ || has_checkpoints) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
  if (!ec && !kept_previous_.empty()) fs::rename(kept_previous_, path_, ec);
  if (ec) log_warning("warning: " + path_ + ": could not undo this run's new run directory: " + ec.message());
}

}  // namespace trainyard::host
