#include "util/text.h"

#include <algorithm>
#include <cstdio>

namespace trainyard::host {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_distance) best_distance = d, best = c;
  }
  return best;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string c = closest(word, candidates);
  return c.empty() ? "" : "did you mean '" + c + "'?";
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  if (items.empty()) return "(none)";
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

std::string readable_number(double value, int significant) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", significant, value);
  return buf;
}

std::string count_of(int64_t count, const std::string& singular, const std::string& plural) {
  return std::to_string(count) + " " + (count == 1 ? singular : plural.empty() ? singular + "s" : plural);
}

std::string quoted_value(const std::string& value, size_t limit) {
  if (value.size() <= limit) return "'" + value + "'";
  size_t cut = limit * 3 / 4;
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  std::string text = "'";
  text.append(value, 0, cut);
  return text + "...' (" + std::to_string(value.size()) + " bytes)";
}

}  // namespace trainyard::host
