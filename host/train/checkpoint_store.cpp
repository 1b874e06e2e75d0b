#include "train/checkpoint_store.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <thread>
#include <utility>

#include "config/experiment.h"
#include "log/log.h"
#include "trainyard/error.h"
#include "util/background_worker.h"
#include "util/clock.h"
#include "util/files.h"
#include "util/process.h"

namespace fs = std::filesystem;

namespace trainyard::host {

namespace {

const std::regex kName(R"(ckpt-e(\d+)-i(\d+)\.pt)");

std::string checkpoint_file_name(const LoopPosition& at) {
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-e%04lld-i%08lld.pt", static_cast<long long>(at.epoch),
                static_cast<long long>(at.iteration));
  return name;
}

// Temporary files of interrupted writes (*.tmp-PID) and manifests whose
// checkpoint is gone.
std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  if (!fs::is_directory(dir)) return removed;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const bool temporary = name.find(".tmp-") != std::string::npos;
    const std::string suffix = ".manifest.json";
    const bool orphan = name.size() > suffix.size() &&
                        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
                        !fs::exists(entry.path().parent_path() / name.substr(0, name.size() - suffix.size()));
    if (temporary || orphan) {
      std::error_code ec;
      fs::remove(entry.path(), ec);
      if (!ec) removed.push_back(name);
    }
  }
  return removed;
}

}  // namespace

std::optional<LoopPosition> position_of_name(const std::string& path) {
  std::smatch m;
  const std::string name = fs::path(path).filename().string();
  if (!std::regex_match(name, m, kName)) return std::nullopt;
  LoopPosition at;
  at.epoch = std::stoll(m[1]);
  at.iteration = std::stoll(m[2]);
  return at;
}

namespace {

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::string>> found;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw ConfigError(dir + ": not a folder", "expected the run's checkpoint folder, found a file",
                      "move the file away, or run with --fresh to start over");
  if (!fs::is_directory(dir)) return {};
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(name, m, kName))
      found.push_back({{std::stoll(m[2]), std::stoll(m[1])}, entry.path().string()});
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

void prune_checkpoints(const std::string& dir, int64_t keep) {
  if (keep <= 0) return;
  auto files = list_checkpoints(dir);
  // Oldest first; the newest `keep` stay (the one just written among them), and
  // best.pt is not a ckpt-* file: rotation never touches it.
  for (size_t i = 0; i + static_cast<size_t>(keep) < files.size(); ++i) {
    fs::remove(manifest_path(files[i]));
    fs::remove(files[i]);
  }
}

}  // namespace

CheckpointStore::CheckpointStore(std::string dir, int64_t keep, bool async)
    : dir_(std::move(dir)),
      keep_(keep),
      writer_(async ? std::make_unique<BackgroundWorker>("checkpoint write") : nullptr) {}

CheckpointStore::~CheckpointStore() = default;

std::string CheckpointStore::path_of(const LoopPosition& at) const {
  return (fs::path(dir_) / checkpoint_file_name(at)).string();
}

std::vector<std::string> CheckpointStore::list() const { return list_checkpoints(dir_); }

bool CheckpointStore::has_manifest(const std::string& path) const {
  std::error_code ec;
  return fs::exists(manifest_path(path), ec);
}

std::vector<std::string> CheckpointStore::remove_stale_temporaries() const {
  return host::remove_stale_temporaries(dir_);
}

namespace {
using Clock = std::chrono::steady_clock;
std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", s);
  return text;
}
// The line each checkpoint logs: how long the loop waited for it, how long its write took and where.
std::string written_line(const std::string& name, double blocked, double took, const std::string& where) {
  return "trainyard: checkpoint " + name + " (loop blocked " + seconds_text(blocked) + "; written in " +
         seconds_text(took) + " " + where + ")";
}
}  // namespace

void CheckpointStore::write(const std::string& path, const std::function<void()>& write_file) {
  try {
    write_file();
  } catch (const Error& err) {
    // The temporary file is gone; the older checkpoints are as they were.
    std::string older = "the earlier checkpoints are as they were";  // when the folder cannot be listed
    try {
      auto kept = list();
      kept.erase(std::remove(kept.begin(), kept.end(), path), kept.end());
      older = kept.empty() ? std::string("there is no earlier checkpoint")
                           : "the previous checkpoint " + kept.back() + " is intact";
    } catch (const Error&) {}
    throw Error(std::string("checkpoint not written: ") + err.what() + "; " + older);
  }
  record_whole_checkpoint(path);  // what an abrupt end from now on names
  prune_checkpoints(dir_, keep_);
}

std::string CheckpointStore::save(Network& network, torch::optim::Optimizer& optimizer, const CheckpointState& state,
                                  const std::vector<const CheckpointPart*>& parts) {
  const auto t0 = Clock::now();
  const std::string path = path_of(state.at);
  const std::string name = fs::path(path).filename().string();
  if (writer_) {
    writer_->wait();  // the previous write's failure is this save's
    log_written();
  }
  fs::create_directories(dir_);
  if (!writer_) {
    // The archive with the training state's own tensors: written before the training goes on.
    write(path, [&] { save_checkpoint(path, network, optimizer, state, parts); });
    const double took = seconds_since(t0);
    record(blocked_, took);
    record(written_, took);
    log_info(written_line(name, took, took, "on the training thread"));
    return path;
  }
  auto snapshot = std::make_shared<CheckpointSnapshot>(snapshot_checkpoint(network, optimizer, state, parts));
  const double blocked = seconds_since(t0);
  record(blocked_, blocked);
  writer_->start([this, path, name, snapshot, blocked] {
    const auto t1 = Clock::now();
    // Test hook: a write that takes this long, for the tests of a stop or crash during one (docs/reliability.md).
    if (const char* delay = std::getenv("TRAINYARD_TEST_CHECKPOINT_WRITE_DELAY_MS"))
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay)));
    write(path, [&] { write_checkpoint(path, *snapshot); });
    const double took = seconds_since(t1);
    record(written_, took);
    // Told by the training thread (log_written()): a line from this thread
    // could cut into the console's live progress line.
    std::lock_guard<std::mutex> lock(stats_mutex_);
    written_line_ = written_line(name, blocked, took, "in the background");
  });
  return path;
}

void CheckpointStore::log_written() {
  std::string line;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    line = std::exchange(written_line_, {});
  }
  if (!line.empty()) log_info(line);
}

void CheckpointStore::finish() {
  if (!writer_) return;
  writer_->wait();
  log_written();
}

void CheckpointStore::finish_quietly() {
  if (!writer_) return;
  writer_->wait_quietly();
  log_written();
}

void CheckpointStore::record(DurationStats& stats, double seconds) {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats.add(seconds);
}

DurationStats CheckpointStore::blocked_stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return blocked_;
}

DurationStats CheckpointStore::write_stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return written_;
}

void CheckpointStore::keep_as_best(const LoopPosition& at) {
  auto copy = [latest = path_of(at), best = (fs::path(dir_) / "best.pt").string()] {
    if (!fs::exists(latest)) return;
    replace_file_atomic(
        best, [&](const std::string& tmp) { fs::copy_file(latest, tmp, fs::copy_options::overwrite_existing); });
    replace_file_atomic(manifest_path(best), [&](const std::string& tmp) {
      fs::copy_file(manifest_path(latest), tmp, fs::copy_options::overwrite_existing);
    });
  };
  if (writer_)
    writer_->after_current(copy);  // once the checkpoint is whole
  else
    copy();
}

std::shared_ptr<CheckpointStore> make_checkpoint_store(const std::string& dir, const Experiment& stage) {
  return std::make_shared<CheckpointStore>(dir, stage.checkpoint.keep, stage.checkpoint.async);
}

}  // namespace trainyard::host
