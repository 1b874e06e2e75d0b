#pragma once
// CSV as RFC 4180 writes it: one codec for every table the host writes
// (sweep.csv, predictions, meter results) and reads back (the report).
#include <string>
#include <vector>

namespace trainyard::host {

/// A cell with a comma, a quote or a line break is quoted, its quotes doubled.
std::string csv_cell(const std::string& cell);
/// The cells joined by commas, ending in "\n".
std::string csv_row(const std::vector<std::string>& cells);
/// Every row of a CSV text (quoted cells may hold commas, quotes and line breaks).
std::vector<std::vector<std::string>> parse_csv(const std::string& text);

}  // namespace trainyard::host
