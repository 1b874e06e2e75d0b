#pragma once
// Small text helpers shared by the CLI, the config checker and the registry.
#include <cstdint>
#include <string>
#include <vector>

namespace trainyard::host {

/// Edit distance, for "did you mean" hints.
size_t edit_distance(const std::string& a, const std::string& b);
/// The closest candidate when it is close enough to be a likely typo, else "".
std::string closest(const std::string& word, const std::vector<std::string>& candidates);
/// "did you mean 'x'?" or "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);
/// "a, b, c" (or "(none)").
std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");
std::vector<std::string> split(const std::string& text, char sep);
/// A number for people: `significant` digits, no trailing zeros
/// (0.8591, 2.302, 1.2e-05); "nan", "inf" as such. Files keep json_number.
std::string readable_number(double value, int significant = 4);
/// A value a user gave, as a message shows it: 'relu'. A long one is cut at a
/// UTF-8 boundary and its length said ('xxxx...' (40000 bytes)), so that
/// a pasted file or a runaway value never becomes a 40 KB error line.
std::string quoted_value(const std::string& value, size_t limit = 80);
/// "1 thread", "2 threads": the count and the noun, singular for 1.
std::string count_of(int64_t count, const std::string& singular, const std::string& plural = "");

}  // namespace trainyard::host
