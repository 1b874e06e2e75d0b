// image_folder: ROOT/<class>/<image> files, classes in sorted order.
// csv: "path,label" lines (Lambda's dataset_meta); paths relative to the CSV's
// folder; labels are class indices, or names mapped to indices in sorted order.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <ATen/ATen.h>
#include <trainyard/error.h>

#include "image_dataset.h"

namespace fs = std::filesystem;

namespace image_datasets {
namespace {

using trainyard::ConfigError;

bool is_image(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp" || ext == ".pgm" || ext == ".ppm";
}

class Files : public ImageDataset {
 public:
  Files(const trainyard::Options& o, std::vector<std::pair<std::string, int64_t>> items,
        std::vector<std::string> class_names)
      : ImageDataset(transform_options(o)), items_(std::move(items)) {
    describe(static_cast<int64_t>(class_names.size()), std::move(class_names));
  }
  int64_t size() const override { return static_cast<int64_t>(items_.size()); }

 protected:
  LoadedSample load(int64_t index) const override {
    const auto& [path, label] = items_.at(static_cast<size_t>(index));
    LoadedSample s;
    s.inputs.push_back(read_image(path));
    s.label = at::scalar_tensor(label, at::kLong);
    return s;
  }

 private:
  std::vector<std::pair<std::string, int64_t>> items_;
};

}  // namespace

trainyard::Schema image_folder_schema() {
  trainyard::Schema s;
  s.require("root", trainyard::OptionType::string, "folder with one sub-folder of images per class");
  add_transform_options(s);
  return s;
}

std::shared_ptr<trainyard::Dataset> make_image_folder(const trainyard::Options& o) {
  const auto& root = o.get<std::string>("root");
  if (!fs::is_directory(root))
    throw ConfigError("root '" + root + "' is not a folder", "expected ROOT/<class>/<image files>", "check the path");
  std::vector<std::string> classes;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) classes.push_back(e.path().filename().string());
  std::sort(classes.begin(), classes.end());
  std::vector<std::pair<std::string, int64_t>> items;
  for (size_t c = 0; c < classes.size(); ++c) {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(fs::path(root) / classes[c]))
      if (e.is_regular_file() && is_image(e.path())) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    for (auto& f : files) items.emplace_back(std::move(f), static_cast<int64_t>(c));
  }
  if (items.empty())
    throw ConfigError("root '" + root + "' holds no images", "expected ROOT/<class>/*.png|jpg", "check the path");
  return std::make_shared<Files>(o, std::move(items), std::move(classes));
}

trainyard::Schema csv_schema() {
  trainyard::Schema s;
  s.require("file", trainyard::OptionType::string, "CSV of path,label lines (a header line is allowed)");
  add_transform_options(s);
  return s;
}

std::shared_ptr<trainyard::Dataset> make_csv(const trainyard::Options& o) {
  const auto& file = o.get<std::string>("file");
  std::ifstream in(file);
  if (!in) throw ConfigError("CSV '" + file + "' cannot be read", "expected a file of path,label lines", "check the path");
  const fs::path base = fs::path(file).parent_path();
  std::vector<std::pair<std::string, std::string>> rows;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    auto comma = line.rfind(',');
    if (comma == std::string::npos)
      throw ConfigError(file + ":" + std::to_string(line_number) + ": no comma", "expected path,label, got '" + line + "'", "");
    std::string path = line.substr(0, comma), label = line.substr(comma + 1);
    if (line_number == 1 && (label == "label" || path == "path")) continue;  // header
    fs::path p = path;
    rows.emplace_back((p.is_absolute() ? p : base / p).string(), label);
  }
  if (rows.empty()) throw ConfigError("CSV '" + file + "' has no rows", "expected path,label lines", "");
  // Integer labels are class indices; otherwise names, numbered in sorted order.
  bool numeric = std::all_of(rows.begin(), rows.end(), [](const auto& r) {
    return !r.second.empty() && r.second.find_first_not_of("0123456789") == std::string::npos;
  });
  std::vector<std::string> classes;
  std::map<std::string, int64_t> index;
  if (!numeric) {
    std::set<std::string> names;
    for (const auto& r : rows) names.insert(r.second);
    classes.assign(names.begin(), names.end());
    for (size_t i = 0; i < classes.size(); ++i) index[classes[i]] = static_cast<int64_t>(i);
  }
  std::vector<std::pair<std::string, int64_t>> items;
  int64_t max_label = -1;
  for (const auto& r : rows) {
    int64_t label = numeric ? std::stoll(r.second) : index[r.second];
    max_label = std::max(max_label, label);
    items.emplace_back(r.first, label);
  }
  if (numeric)
    for (int64_t i = 0; i <= max_label; ++i) classes.push_back(std::to_string(i));
  return std::make_shared<Files>(o, std::move(items), std::move(classes));
}

}  // namespace image_datasets
