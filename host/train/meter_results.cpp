#include "train/meter_results.h"

#include <filesystem>

#include "distributed/communicator.h"
#include "train/guard.h"
#include "trainyard/error.h"
#include "util/csv.h"
#include "util/files.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

bool valid_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

// Checks a result before anything is written; the message names what is wrong.
void check(const MeterResult& r) {
  if (!valid_name(r.name))
    throw Error("result name '" + r.name +
                "' is not a file name stem; expected lower-case letters, digits, '_' and '-'");
  for (size_t i = 0; i < r.rows.size(); ++i)
    if (r.rows[i].size() != r.columns.size())
      throw Error("result '" + r.name + "': row " + std::to_string(i) + " has " + std::to_string(r.rows[i].size()) +
                  " cells; expected " + std::to_string(r.columns.size()) + " (one per column)");
  if (r.columns.empty() && !r.rows.empty())
    throw Error("result '" + r.name + "' has rows but no columns; expected column names");
  if (!r.file_extension.empty() && (r.file_extension[0] != '.' || !valid_name(r.file_extension.substr(1))))
    throw Error("result '" + r.name + "': file extension '" + r.file_extension +
                "'; expected a dot and a name, e.g. \".txt\"");
}

}  // namespace

void take_meter_values(const MeterValues& values, int64_t epoch, int64_t iteration, MeterValues& latest,
                       std::map<std::string, MeterReading>& readings) {
  for (const auto& [name, value] : values) {
    latest[name] = value;
    readings[name] = MeterReading{value, epoch, iteration};
  }
}

std::string meter_result_stem(const std::string& run_dir, const std::string& name, int64_t epoch, int64_t position,
                              int64_t iteration) {
  std::string stem = name + "-e" + std::to_string(epoch);
  if (position > 0) stem += "-i" + std::to_string(iteration);
  return (fs::path(run_dir) / "meters" / stem).string();
}

MeterState meter_state(const Built<Meter>& m) {
  MeterState state;
  state.accumulators = guarded(*m.config, "accumulators", [&] { return m.object->accumulators(); });
  if (SampleMeter* sample_meter = m.facets.sample_meter) {
    state.sample_meter = true;
    state.rows = guarded(*m.config, "rows", [&] { return sample_meter->rows(); });
  }
  return state;
}

void set_meter_state(const Built<Meter>& m, const MeterState& state) {
  guarded(*m.config, "set_accumulators", [&] { m.object->set_accumulators(state.accumulators); });
  if (SampleMeter* sample_meter = m.facets.sample_meter)
    guarded(*m.config, "set_rows", [&] { sample_meter->set_rows(state.rows); });
}

void with_all_ranks_state(const Built<Meter>& m, Communicator* comm, const std::function<void()>& read) {
  if (!comm) return read();
  const MeterState local = meter_state(m);
  MeterState all = local;
  all.accumulators = comm->sum(local.accumulators);
  if (local.sample_meter) all.rows = comm->gather_rows(local.rows);
  set_meter_state(m, all);
  // This rank's own state back even when `read` fails, so that the error is the one reported.
  try {
    read();
  } catch (...) {
    try {
      set_meter_state(m, local);
    } catch (...) {}
    throw;
  }
  set_meter_state(m, local);
}

std::vector<std::string> write_meter_results(const std::vector<Built<Meter>>& meters, const std::string& run_dir,
                                             int64_t epoch, int64_t position, int64_t iteration, Communicator* comm,
                                             bool write) {
  std::vector<std::string> written;
  for (const auto& m : meters) {
    std::vector<MeterResult> results;
    with_all_ranks_state(m, comm,
                         [&] { results = guarded(*m.config, "results", [&] { return m.object->results(); }); });
    if (!write) continue;
    for (const auto& r : results) {
      guarded(*m.config, "results", [&] { check(r); });
      if (r.columns.empty() && r.file_extension.empty()) continue;
      fs::create_directories(fs::path(run_dir) / "meters");
      const std::string stem = meter_result_stem(run_dir, r.name, epoch, position, iteration);
      if (!r.columns.empty()) {
        std::string table = csv_row(r.columns);
        for (const auto& row : r.rows) table += csv_row(row);
        write_file_atomic(stem + ".csv", table);
        written.push_back(stem + ".csv");
      }
      if (!r.file_extension.empty()) {
        write_file_atomic(stem + r.file_extension, r.file_contents);
        written.push_back(stem + r.file_extension);
      }
    }
  }
  return written;
}

}  // namespace trainyard::host
