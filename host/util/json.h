#pragma once
// JSON through nlohmann/json (Debian's nlohmann-json3-dev): the host's own
// files are built as trees and printed here, never by string concatenation.
#include <string>

#include <nlohmann/json.hpp>

namespace trainyard::host {

/// Shortest text that reads back as the same double; NaN and infinities as
/// "null". Also how numbers are printed on the console.
std::string json_number(double value);
/// A float32 value as the double of its shortest decimal text (12.3f as
/// 12.3, not 12.300000190734863): how float tensors' values are written to
/// JSON and CSV; NaN and infinities as they are.
double shortest_float(float value);
/// A double as a JSON value: integral values as integers (2, not 2.0), NaN
/// and infinities as null (JSON has no such numbers).
nlohmann::ordered_json json_value(double value);
/// JSON text with a space after ':' and ',' ({"a": 1, "b": [1, 2]}), which
/// `grep '"phase": "test"'` and people read easily; with `one_key_per_line`,
/// each top-level key on its own line (summary.json, provenance.json).
std::string json_text(const nlohmann::ordered_json& value, bool one_key_per_line = false);
/// Parses JSON text; nullopt-like: a discarded value (is_discarded()) on a syntax error.
nlohmann::ordered_json parse_json(const std::string& text);
/// The same for a file; discarded when it is missing or unreadable.
nlohmann::ordered_json read_json_file(const std::string& path);

}  // namespace trainyard::host
