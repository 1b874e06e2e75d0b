#include "train/meter_results.h"

#include <filesystem>
#include <fstream>

#include "train/guard.h"
#include "trainyard/error.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

bool valid_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

// RFC 4180: a cell with a comma, a quote or a line break is quoted, its quotes doubled.
std::string csv_cell(const std::string& cell) {
  if (cell.find_first_of(",\"\r\n") == std::string::npos) return cell;
  std::string out = "\"";
  for (char c : cell) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void write_csv_row(std::ostream& out, const std::vector<std::string>& cells) {
  for (size_t i = 0; i < cells.size(); ++i) out << (i ? "," : "") << csv_cell(cells[i]);
  out << "\n";
}

void write_file(const std::string& path, const std::function<void(std::ostream&)>& body) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(tmp + ": cannot write a meter result");
    body(out);
    if (!out.flush()) throw Error(tmp + ": cannot write a meter result");
  }
  fs::rename(tmp, path);
}

// Checks a result before anything is written; the message names what is wrong.
void check(const MeterResult& r) {
  if (!valid_name(r.name))
    throw Error("result name '" + r.name + "' is not a file name stem; expected lower-case letters, digits, '_' and '-'");
  for (size_t i = 0; i < r.rows.size(); ++i)
    if (r.rows[i].size() != r.columns.size())
      throw Error("result '" + r.name + "': row " + std::to_string(i) + " has " + std::to_string(r.rows[i].size()) +
                  " cells; expected " + std::to_string(r.columns.size()) + " (one per column)");
  if (r.columns.empty() && !r.rows.empty())
    throw Error("result '" + r.name + "' has rows but no columns; expected column names");
  if (!r.file_extension.empty() && (r.file_extension[0] != '.' || !valid_name(r.file_extension.substr(1))))
    throw Error("result '" + r.name + "': file extension '" + r.file_extension + "'; expected a dot and a name, e.g. \".txt\"");
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

std::vector<std::string> write_meter_results(const std::vector<Built<Meter>>& meters, const std::string& run_dir,
                                             int64_t epoch, int64_t position, int64_t iteration,
                                             const SumOverRanks& sum, bool write) {
  std::vector<std::string> written;
  for (const auto& m : meters) {
    // Over ranks: the summed accumulators, as for values(); then this rank's own back.
    std::vector<double> local;
    if (sum) {
      local = guarded(*m.config, "accumulators", [&] { return m.object->accumulators(); });
      auto global = sum(local);
      guarded(*m.config, "set_accumulators", [&] { m.object->set_accumulators(global); });
    }
    auto results = guarded(*m.config, "results", [&] { return m.object->results(); });
    if (sum) guarded(*m.config, "set_accumulators", [&] { m.object->set_accumulators(local); });
    if (!write) continue;
    for (const auto& r : results) {
      guarded(*m.config, "results", [&] { check(r); });
      if (r.columns.empty() && r.file_extension.empty()) continue;
      fs::create_directories(fs::path(run_dir) / "meters");
      const std::string stem = meter_result_stem(run_dir, r.name, epoch, position, iteration);
      if (!r.columns.empty()) {
        write_file(stem + ".csv", [&](std::ostream& out) {
          write_csv_row(out, r.columns);
          for (const auto& row : r.rows) write_csv_row(out, row);
        });
        written.push_back(stem + ".csv");
      }
      if (!r.file_extension.empty()) {
        write_file(stem + r.file_extension, [&](std::ostream& out) { out << r.file_contents; });
        written.push_back(stem + r.file_extension);
      }
    }
  }
  return written;
}

}  // namespace trainyard::host
