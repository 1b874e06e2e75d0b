#include "trainyard/labeled_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "trainyard/error.h"
#include "trainyard/image_codec.h"

namespace fs = std::filesystem;

namespace trainyard {

namespace {
// The formats looked for by file name (image_codec.h's table gives their extensions).
constexpr std::initializer_list<image_codec::Format> kFileFormats{image_codec::Format::jpeg, image_codec::Format::png,
                                                                  image_codec::Format::bmp, image_codec::Format::pnm};
}  // namespace

const std::vector<std::string>& image_file_extensions() {
  static const std::vector<std::string> extensions = image_codec::image_extensions(kFileFormats);
  return extensions;
}

bool is_image_file(const std::string& path) {
  const image_codec::Format f = image_codec::format_for_extension(fs::path(path).extension().string());
  return std::find(kFileFormats.begin(), kFileFormats.end(), f) != kFileFormats.end();
}

std::vector<std::string> sorted_image_files(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(folder))
    if (e.is_regular_file() && is_image_file(e.path().string())) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

LabeledFiles list_class_folders(const std::string& root) {
  LabeledFiles out;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) out.class_names.push_back(e.path().filename().string());
  std::sort(out.class_names.begin(), out.class_names.end());
  for (size_t c = 0; c < out.class_names.size(); ++c) {
    const fs::path folder = fs::path(root) / out.class_names[c];
    for (const auto& name : sorted_image_files(folder.string())) {
      out.paths.push_back((folder / name).string());
      out.labels.push_back(static_cast<int64_t>(c));
    }
  }
  return out;
}

LabeledFiles read_path_label_csv(const std::string& file) {
  std::ifstream in(file);
  if (!in)
    throw ConfigError("CSV '" + file + "' cannot be read", "expected a file of path,label lines", "check the path");
  const fs::path base = fs::path(file).parent_path();
  std::vector<std::pair<std::string, std::string>> rows;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    auto comma = line.rfind(',');
    if (comma == std::string::npos)
      throw DataError(file + ":" + std::to_string(line_number) + ": no comma",
                      "expected path,label, got '" + line + "'", "");
    std::string path = line.substr(0, comma), label = line.substr(comma + 1);
    if (line_number == 1 && (label == "label" || path == "path")) continue;  // header
    fs::path p = path;
    rows.emplace_back((p.is_absolute() ? p : base / p).string(), label);
  }
  if (rows.empty()) throw DataError("CSV '" + file + "' has no rows", "expected path,label lines", "");
  const bool numeric = std::all_of(rows.begin(), rows.end(), [](const auto& r) {
    return !r.second.empty() && r.second.find_first_not_of("0123456789") == std::string::npos;
  });
  LabeledFiles out;
  std::map<std::string, int64_t> index;
  if (!numeric) {
    std::set<std::string> names;
    for (const auto& r : rows) names.insert(r.second);
    out.class_names.assign(names.begin(), names.end());
    for (size_t i = 0; i < out.class_names.size(); ++i) index[out.class_names[i]] = static_cast<int64_t>(i);
  }
  // Numeric labels are class indices, and the classes are 0..largest: a
  // damaged label in the billions must not make billions of class names.
  // They are digits only (checked above): 6 of them are at most 999999.
  constexpr size_t kLabelDigits = 6;
  int64_t max_label = -1;
  for (const auto& r : rows) {
    if (numeric && r.second.size() > kLabelDigits)
      throw DataError(file + ": the row for " + r.first + " has label " +
                          (r.second.size() > 24 ? r.second.substr(0, 20) + "..." : r.second),
                      "expected numeric labels from 0 to 999999 (class indices)",
                      "check that row; class names as labels are counted instead");
    const int64_t label = numeric ? std::stoll(r.second) : index[r.second];
    max_label = std::max(max_label, label);
    out.paths.push_back(r.first);
    out.labels.push_back(label);
  }
  if (numeric)
    for (int64_t i = 0; i <= max_label; ++i) out.class_names.push_back(std::to_string(i));
  return out;
}

}  // namespace trainyard
