#pragma once
/// Image files with class labels, as the `image_folder` and `csv` datasets and
/// `trainyard convert --from folder|csv` find them. One implementation, so the
/// dataset and the converter always agree on order and labels. No LibTorch,
/// no OpenCV.
///
/// Example:
///   trainyard::LabeledFiles files = trainyard::read_path_label_csv("data/meta.csv");
///   // files.paths[i] has class files.labels[i], named files.class_names[files.labels[i]]

#include <cstdint>
#include <string>
#include <vector>

namespace trainyard {

struct LabeledFiles {
  std::vector<std::string> paths;
  std::vector<int64_t> labels;
  std::vector<std::string> class_names;
};

/// The extensions of the image files looked for by name: JPEG, PNG, BMP and
/// PNM's in image_codec.h's table ("jpg", "jpeg", "png", "bmp", "pgm", "ppm").
const std::vector<std::string>& image_file_extensions();
/// A path ending in one of image_file_extensions() (any case).
bool is_image_file(const std::string& path);
/// Names of the image files directly in `folder`, sorted.
std::vector<std::string> sorted_image_files(const std::string& folder);

/// ROOT/<class>/<image>: classes are the sub-folders in sorted order, files
/// sorted within each. May be empty.
LabeledFiles list_class_folders(const std::string& root);

/// "path,label" lines (Lambda's dataset_meta): paths relative to the CSV's
/// folder; a first line "path,label" is a header; integer labels are class
/// indices (classes "0".."max"), anything else names, numbered in sorted
/// order. Throws ConfigError naming the file (and line) when it cannot be
/// read, a line has no comma, or there are no rows.
LabeledFiles read_path_label_csv(const std::string& file);

/// Images, each with a second image of the same sample (its mask): the
/// `image_folder` and `csv` datasets with target: mask, and `trainyard convert
/// --from parallel`, pair files by these rules.
struct PairedFiles {
  std::vector<std::string> inputs;
  std::vector<std::string> targets;  ///< targets[i] belongs to inputs[i]
};

/// The file in `folder` that goes with the image named `name`: the file of
/// that name, else the one image file with its stem (a.jpg's mask a.png).
/// Empty when there is none; throws DataError naming both when two files
/// have the stem and neither has the name.
std::string file_beside(const std::string& folder, const std::string& name);

/// The images directly in `inputs` (sorted by name), each with its file in
/// `targets` (file_beside). Throws DataError naming the first image with no
/// partner, or an empty `inputs`.
PairedFiles pair_image_folders(const std::string& inputs, const std::string& targets);

/// "image,target" lines (paths relative to the CSV's folder; a first line
/// "image,mask" or "path,mask" is a header). Throws DataError naming the
/// file and line of a row without exactly one comma, or a file of no rows.
PairedFiles read_path_pair_csv(const std::string& file);

}  // namespace trainyard
