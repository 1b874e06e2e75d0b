#include "report/final_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "util/text.h"

namespace trainyard::host {
namespace {

constexpr size_t kWidth = 80, kName = 30, kValue = 11;

std::string cell(const std::string& text, size_t width) {
  if (text.size() >= width) return text.substr(0, width - 1) + " ";
  return text + std::string(width - text.size(), ' ');
}

std::string right(const std::string& text, size_t width) {
  return text.size() >= width ? text.substr(0, width) : std::string(width - text.size(), ' ') + text;
}

}  // namespace

std::string final_table(const NamedValues& last, const std::vector<MetricsEvent>& events) {
  struct Row {
    std::string train, test, best;
  };
  std::map<std::string, Row> rows;
  std::vector<std::string> others;
  for (const auto& [name, value] : last) {
    if (name.rfind("train_", 0) == 0)
      rows[name.substr(6)].train = readable_number(value);
    else if (name.rfind("test_", 0) == 0)
      rows[name.substr(5)].test = readable_number(value);
    else
      others.push_back(name + " " + readable_number(value));
  }
  // The best test value of each quantity and the epoch of that test.
  for (auto& [quantity, row] : rows) {
    const std::string key = "test_" + quantity;
    const bool least = quantity.find("loss") != std::string::npos;
    double best = NAN;
    int64_t epoch = 0;
    for (const auto& e : events) {
      auto it = e.values.find(key);
      if (e.phase != "test" || it == e.values.end() || std::isnan(it->second)) continue;
      if (std::isnan(best) || (least ? it->second < best : it->second > best)) best = it->second, epoch = e.epoch;
    }
    if (!std::isnan(best)) row.best = readable_number(best) + " (" + std::to_string(epoch) + ")";
  }
  std::string out;
  if (!rows.empty()) {
    out += "  " + cell("", kName) + right("train", kValue) + right("test", kValue) + "  best test (epoch)\n";
    for (const auto& [quantity, row] : rows)
      out += "  " + cell(quantity, kName) + right(row.train, kValue) + right(row.test, kValue) + "  " + row.best + "\n";
  }
  // The rest, wrapped: "  lr 0.001, samples_per_sec 4269, ..."
  std::string line = "  ";
  for (size_t i = 0; i < others.size(); ++i) {
    const std::string item = others[i] + (i + 1 < others.size() ? "," : "");
    if (line.size() > 2 && line.size() + 1 + item.size() > kWidth) out += line + "\n", line = "  ";
    line += (line.size() > 2 ? " " : "") + item;
  }
  if (line.size() > 2) out += line + "\n";
  return out;
}

}  // namespace trainyard::host
