#include "csv_log.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace csv_logger {
namespace {

std::string cell(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);  // exact: files keep every digit
  return buf;
}

std::string quoted(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

CsvLog::CsvLog(std::string path, int64_t resumed_at) : path_(std::move(path)) {
  std::ifstream in(path_);
  std::string text;
  if (!in || !std::getline(in, text)) return;
  auto cells = [](const std::string& line) {  // names may be quoted; values never are
    std::vector<std::string> out;
    std::string current;
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"')
        current += '"', ++i;
      else if (c == '"')
        quoted = !quoted;
      else if (c == ',' && !quoted)
        out.push_back(current), current.clear();
      else
        current += c;
    }
    out.push_back(current);
    return out;
  };
  const std::vector<std::string> header = cells(text);
  if (header.size() < 3 || header[0] != "phase") return;  // not ours: replaced at the first row
  columns_.assign(header.begin() + 3, header.end());
  while (std::getline(in, text)) {
    const std::vector<std::string> row = cells(text);
    if (row.size() != header.size()) continue;
    Row r{row[0], std::stoll(row[1]), std::stoll(row[2]), {}};
    if (r.iteration > resumed_at) continue;
    for (size_t k = 3; k < row.size(); ++k)
      if (!row[k].empty()) r.values[header[k]] = std::stod(row[k]);
    rows_.push_back(std::move(r));
  }
  rewrite();  // without the rows past the resume point
}

std::string CsvLog::line(const Row& row) const {
  std::string out = row.phase + "," + std::to_string(row.epoch) + "," + std::to_string(row.iteration);
  for (const auto& name : columns_) {
    out += ",";
    if (auto it = row.values.find(name); it != row.values.end()) out += cell(it->second);
  }
  return out + "\n";
}

void CsvLog::rewrite() const {
  const std::string tmp = path_ + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "phase,epoch,iteration";
    for (const auto& name : columns_) out << "," << quoted(name);
    out << "\n";
    for (const auto& row : rows_) out << line(row);
    if (!out.flush()) throw std::runtime_error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path_);
}

void CsvLog::add(Row row) {
  bool wider = rows_.empty();
  for (const auto& [name, value] : row.values)
    if (std::find(columns_.begin(), columns_.end(), name) == columns_.end()) columns_.push_back(name), wider = true;
  rows_.push_back(std::move(row));
  if (wider) return rewrite();
  std::ofstream out(path_, std::ios::app);
  out << line(rows_.back());
  if (!out.flush()) throw std::runtime_error("cannot append to " + path_);
}

}  // namespace csv_logger
