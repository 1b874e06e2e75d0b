#include "train/run_log.h"

#include <ctime>
#include <filesystem>

#include "util/files.h"

namespace fs = std::filesystem;

namespace trainyard::host {

RunLog::RunLog(RunPaths paths, int rank)
    : paths_(std::move(paths)), rank_(rank), file_(rank == 0 ? paths_.metrics : paths_.rank_log(rank)) {}

void RunLog::append(const MetricsEvent& event) {
  if (rank_ != 0) fs::create_directories(fs::path(file_).parent_path());
  append_line(file_, encode_event(event));
}

void RunLog::append(const std::string& phase, const std::map<std::string, double>& values, const LoopPosition& at,
                    const std::string& stage) {
  MetricsEvent event;
  event.phase = phase;
  event.epoch = at.position == 0 ? at.epoch : at.epoch + 1;
  event.iteration = at.iteration;
  event.stage = stage;
  event.time = static_cast<double>(std::time(nullptr));
  event.values = values;
  append(event);
}

void RunLog::forget_after(int64_t iteration) {
  if (rank_ != 0 || !fs::exists(file_)) return;
  std::string kept;
  for (const auto& line : read_lines(file_)) {
    const auto event = decode_event(line);
    if (event && event->iteration > iteration) continue;
    kept += line + "\n";
  }
  write_file_atomic(file_, kept);
}

void RunLog::write_summary(const RunSummary& summary) {
  if (rank_ == 0) write_file_atomic(paths_.summary, encode_summary(summary));
}

bool RunLog::has_summary() const { return fs::exists(paths_.summary); }

}  // namespace trainyard::host
