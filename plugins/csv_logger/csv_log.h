#pragma once
// A CSV file of logged rows whose header is every value name seen so far:
// a row with a new name rewrites the file (atomically: a temporary file
// renamed over it) with the wider header; otherwise the row is appended.
// Cells of names a row lacks are empty, as CSV readers take missing values.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace csv_logger {

struct Row {
  std::string phase;  ///< train_step, train, test
  int64_t epoch = 0, iteration = 0;
  std::map<std::string, double> values;
};

class CsvLog {
 public:
  /// Continues the file at `path` if there is one, keeping its rows up to
  /// iteration `resumed_at` (a resumed run redoes what came after).
  CsvLog(std::string path, int64_t resumed_at);
  void add(Row row);
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  std::string line(const Row& row) const;
  void rewrite() const;
  std::string path_;
  std::vector<std::string> columns_;  ///< value names, in order of first appearance
  std::vector<Row> rows_;
};

}  // namespace csv_logger
