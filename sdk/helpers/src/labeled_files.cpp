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

namespace {

// A CSV's non-empty lines with their numbers (a Windows line end dropped);
// `rows` says what its lines hold in the error for a file that cannot be read.
std::vector<std::pair<int, std::string>> csv_lines(const std::string& file, const std::string& rows) {
  std::ifstream in(file);
  if (!in)
    throw ConfigError("CSV '" + file + "' cannot be read", "expected a file of " + rows + " lines", "check the path");
  std::vector<std::pair<int, std::string>> lines;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.emplace_back(number, std::move(line));
  }
  return lines;
}

// A path of a CSV's row: relative paths are taken from the CSV's folder.
std::string csv_path(const std::string& file, const std::string& path) {
  const fs::path p = path;
  return (p.is_absolute() ? p : fs::path(file).parent_path() / p).string();
}

}  // namespace

LabeledFiles read_path_label_csv(const std::string& file) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& [line_number, line] : csv_lines(file, "path,label")) {
    auto comma = line.rfind(',');
    if (comma == std::string::npos)
      throw DataError(file + ":" + std::to_string(line_number) + ": no comma",
                      "expected path,label, got '" + line + "'", "");
    std::string path = line.substr(0, comma), label = line.substr(comma + 1);
    if (line_number == 1 && (label == "label" || path == "path")) continue;  // header
    rows.emplace_back(csv_path(file, path), label);
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

std::string file_beside(const std::string& folder, const std::string& name) {
  const fs::path same = fs::path(folder) / name;
  if (fs::is_regular_file(same)) return same.string();
  // Masks are PNGs beside JPEG photographs: the same stem, another extension.
  const std::string stem = fs::path(name).stem().string();
  std::string found;
  for (const auto& candidate : sorted_image_files(folder)) {
    if (fs::path(candidate).stem().string() != stem) continue;
    const std::string path = (fs::path(folder) / candidate).string();
    if (!found.empty())
      throw DataError("'" + name + "' has two files of its stem in " + folder + ": " + found + " and " + path,
                      "expected one file with the name or the stem of each image", "remove or rename one of them");
    found = path;
  }
  return found;
}

PairedFiles pair_image_folders(const std::string& inputs, const std::string& targets) {
  PairedFiles out;
  for (const auto& name : sorted_image_files(inputs)) {
    std::string partner = file_beside(targets, name);
    if (partner.empty())
      throw DataError("'" + name + "' is in " + inputs + " but nothing of its name or stem is in " + targets,
                      "expected a file beside each image (" + name + ", or its stem with another image extension)", "");
    out.inputs.push_back((fs::path(inputs) / name).string());
    out.targets.push_back(std::move(partner));
  }
  if (out.inputs.empty()) {
    std::string names;
    for (const auto& ext : image_file_extensions()) names += (names.empty() ? "" : "|") + ext;
    throw DataError("folder '" + inputs + "' holds no images", "expected *." + names + " directly in it",
                    "check the path");
  }
  return out;
}

PairedFiles read_path_pair_csv(const std::string& file) {
  PairedFiles out;
  for (const auto& [line_number, line] : csv_lines(file, "image,mask")) {
    const auto comma = line.find(',');
    if (comma == std::string::npos || line.find(',', comma + 1) != std::string::npos || comma == 0 ||
        comma + 1 == line.size())
      throw DataError(file + ":" + std::to_string(line_number) + ": '" +
                          (line.size() > 120 ? line.substr(0, 117) + "..." : line) + "'",
                      "expected image,mask (two paths and one comma)", "");
    const std::string image = line.substr(0, comma), target = line.substr(comma + 1);
    if (line_number == 1 && (image == "image" || image == "path") && target == "mask") continue;  // header
    out.inputs.push_back(csv_path(file, image));
    out.targets.push_back(csv_path(file, target));
  }
  if (out.inputs.empty()) throw DataError("CSV '" + file + "' has no rows", "expected image,mask lines", "");
  return out;
}

}  // namespace trainyard
