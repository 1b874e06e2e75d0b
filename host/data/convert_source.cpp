#include "data/convert_source.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>

#include <opencv2/imgproc.hpp>

#include "trainyard/error.h"
#include "trainyard/image_codec.h"
#include "trainyard/labeled_files.h"
#include "util/files.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

void need_folder(const std::string& dir, const std::string& what) {
  if (!fs::is_directory(dir))
    throw ConfigError("convert: " + what + " '" + dir + "' is not a folder", "expected an existing folder",
                      "check the path");
}

std::vector<uint8_t> read_idx(const std::string& path, int rank, std::vector<int64_t>& dims) {
  if (!fs::is_regular_file(path))
    throw ConfigError("convert: " + path + ": file does not exist", "expected an idx file (.gz or plain)", "");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw ConfigError("convert: " + path + ": cannot open", "expected a readable file", "");
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) bytes.insert(bytes.end(), buf, buf + n);
  gzclose(f);
  const size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (bytes.size() < header || bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 8 || bytes[3] != rank)
    throw ConfigError(
        "convert: " + path + ": not an idx file of unsigned bytes with " + std::to_string(rank) + " dimensions",
        "expected the magic 00 00 08 0" + std::to_string(rank), "");
  size_t total = 1;
  for (int i = 0; i < rank; ++i) {
    const uint8_t* d = &bytes[4 + 4 * i];
    dims.push_back((int64_t(d[0]) << 24) | (int64_t(d[1]) << 16) | (int64_t(d[2]) << 8) | d[3]);
    total *= static_cast<size_t>(dims.back());
  }
  if (bytes.size() - header != total)
    throw ConfigError("convert: " + path + ": truncated",
                      "expected " + std::to_string(total) + " data bytes, got " + std::to_string(bytes.size() - header),
                      "");
  return std::vector<uint8_t>(bytes.begin() + static_cast<long>(header), bytes.end());
}

}  // namespace

Source read_source(const ConvertOptions& o) {
  Source s;
  if (o.from == "folder" || o.from == "csv") {
    if (o.inputs.size() != 1)
      throw ConfigError("convert --from " + o.from + ": give one --input " + (o.from == "csv" ? "FILE.csv" : "ROOT"),
                        "expected 1 --input, got " + std::to_string(o.inputs.size()), "");
    LabeledFiles files;
    if (o.from == "folder") {
      need_folder(o.inputs[0], "--input");
      files = list_class_folders(o.inputs[0]);
    } else {
      try {
        files = read_path_label_csv(o.inputs[0]);
      } catch (const ConfigError& e) {
        throw ConfigError(std::string("convert: ") + e.what());
      }
    }
    for (size_t i = 0; i < files.paths.size(); ++i) {
      // The id: class/file for folders, the file name for CSV rows.
      const fs::path p = files.paths[i];
      const std::string id = o.from == "folder" ? p.parent_path().filename().string() + "/" + p.filename().string()
                                                : p.filename().string();
      s.items.push_back({{files.paths[i]}, -1, files.labels[i], id});
    }
    s.class_names = std::move(files.class_names);
    s.description = o.from + " " + o.inputs[0];
  } else if (o.from == "idx") {
    if (o.images.empty() || o.labels.empty())
      throw ConfigError("convert --from idx: needs --images and --labels",
                        "expected e.g. --images train-images-idx3-ubyte.gz --labels train-labels-idx1-ubyte.gz", "");
    std::vector<int64_t> image_dims, label_dims;
    s.idx_pixels = read_idx(o.images, 3, image_dims);
    std::vector<uint8_t> labels = read_idx(o.labels, 1, label_dims);
    if (image_dims[0] != label_dims[0])
      throw ConfigError(
          "convert: " + std::to_string(image_dims[0]) + " images but " + std::to_string(label_dims[0]) + " labels",
          "expected as many labels as images", "");
    s.idx_rows = int(image_dims[1]);
    s.idx_cols = int(image_dims[2]);
    int64_t max_label = 0;
    for (int64_t i = 0; i < image_dims[0]; ++i) {
      s.items.push_back({{}, i, labels[size_t(i)], std::to_string(i)});
      max_label = std::max<int64_t>(max_label, labels[size_t(i)]);
    }
    for (int64_t i = 0; i <= max_label; ++i) s.class_names.push_back(std::to_string(i));
    s.description = "idx " + o.images;
  } else if (o.from == "parallel") {
    if (o.inputs.empty())
      throw ConfigError("convert --from parallel: give --input DIR (repeatable) and optionally --target DIR",
                        "expected at least one --input", "");
    std::vector<std::string> dirs = o.inputs;
    dirs.insert(dirs.end(), o.targets.begin(), o.targets.end());
    for (const auto& d : dirs) need_folder(d, "folder");
    // Samples are the file names of the first folder; every other folder must have them too.
    for (const auto& name : sorted_image_files(dirs[0])) {
      Item item;
      item.id = name;
      for (const auto& d : dirs) {
        // The same name, or the same stem (a photograph's mask: a.jpg, a.png).
        std::string p = file_beside(d, name);
        if (p.empty())
          throw ConfigError("convert: '" + name + "' is in " + dirs[0] + " but not in " + d,
                            "expected each file's name or stem in every parallel folder", "");
        item.files.push_back(std::move(p));
      }
      s.items.push_back(std::move(item));
    }
    s.input_images = int64_t(o.inputs.size());
    s.description = "parallel " + join(dirs);
  } else if (o.from == "coco") {
    if (o.inputs.size() != 1)
      throw ConfigError("convert --from coco: give one --input instances.json (and --images DIR for its file_names)",
                        "expected 1 --input, got " + std::to_string(o.inputs.size()), "");
    if (o.coco_target != "mask" && o.coco_target != "boxes")
      throw ConfigError("convert: --coco-target '" + o.coco_target + "'", "expected mask or boxes",
                        did_you_mean(o.coco_target, {"mask", "boxes"}));
    s.coco_boxes = o.coco_target == "boxes";
    // Masks, as the coco dataset's target: mask paints them: 0 the background, categories 1 to K in id order.
    // Boxes, as its target: boxes reads them: classes 0 to K-1, the categories in id order.
    coco::Instances set;
    try {
      set = coco::read_instances(o.inputs[0], o.images, s.coco_boxes ? coco::Read::boxes : coco::Read::masks);
    } catch (const DataError& e) {
      throw ConfigError(std::string("convert: ") + e.what());
    }
    if (!s.coco_boxes) s.class_names = {"background"};
    s.class_names.insert(s.class_names.end(), set.category_names.begin(), set.category_names.end());
    s.coco_crowd = s.class_names.size() < 255 ? 255 : 65535;
    for (size_t i = 0; i < set.images.size(); ++i) {
      // A box the dataset would skip as a bad record stops convert: a database holds no damaged record.
      if (!set.images[i].bad.empty())
        throw ConfigError("convert: " + set.images[i].bad, "expected every box inside its image",
                          "fix or remove the annotation");
      Item item;
      item.files = {set.images[i].path};
      item.coco_image = static_cast<int64_t>(i);
      item.id = set.images[i].file_name;
      s.items.push_back(std::move(item));
    }
    s.coco_images = std::move(set.images);
    s.description = "coco " + o.inputs[0];
  } else {
    throw ConfigError("convert: unknown --from '" + o.from + "'", "expected one of folder, csv, idx, parallel, coco",
                      did_you_mean(o.from, {"folder", "csv", "idx", "parallel", "coco"}));
  }
  if (s.items.empty())
    throw ConfigError("convert: the source holds no samples (" + s.description + ")", "expected images", "");
  return s;
}

namespace {

// A target image may be a mask of class ids (target: mask): resized by
// nearest neighbour, stored as a PNG of its own depth whatever --encoding
// says, so that no id is mixed with another or lost to JPEG or 8 bits.
enum class Role { input, target };

EncodedImage encode(const cv::Mat& image, const ConvertOptions& o, const std::string& what, Role role = Role::input) {
  const bool target = role == Role::target;
  const std::string encoding = target ? "png" : o.encoding;
  cv::Mat m = image;
  if (o.resize_h > 0 && (m.rows != o.resize_h || m.cols != o.resize_w))
    cv::resize(m, m, cv::Size(o.resize_w, o.resize_h), 0, 0,
               target                ? cv::INTER_NEAREST_EXACT
               : m.rows > o.resize_h ? cv::INTER_AREA
                                     : cv::INTER_LINEAR);
  EncodedImage e;
  e.rows = uint32_t(m.rows);
  e.cols = uint32_t(m.cols);
  e.channels = uint8_t(m.channels());
  if (encoding == "raw") {
    e.encoding = ImageEncoding::raw;
    cv::Mat c = m.isContinuous() ? m : m.clone();
    e.bytes.assign(reinterpret_cast<const char*>(c.data), c.total() * c.elemSize());
    return e;
  }
  try {
    e.bytes = encoding == "png" ? image_codec::encode_png(m) : image_codec::encode_jpeg(m, o.quality);
  } catch (const image_codec::Error& failure) {
    throw Error("convert: cannot encode " + what + " as " + encoding + ": " + failure.what());
  }
  e.encoding = encoding == "png" ? ImageEncoding::png : ImageEncoding::jpeg;
  return e;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The image in a file's bytes, as a record stores it: 8-bit (a target:
// its own depth), BGR or gray.
cv::Mat decode_file(const std::string& bytes, const std::string& path, Role role = Role::input) {
  cv::Mat m;
  try {
    m = image_codec::decode(bytes.data(), bytes.size());
  } catch (const image_codec::Error& e) {
    throw ConfigError("convert: " + path + ": cannot read or decode the image (" + e.what() + ")",
                      "expected a JPEG, PNG, BMP, TIFF, WebP or PNM file", "remove or fix the file");
  }
  if (m.channels() == 4) cv::cvtColor(m, m, cv::COLOR_BGRA2BGR);
  const bool keep_depth = role == Role::target && m.depth() == CV_16U;
  if (m.depth() != CV_8U && !keep_depth) m.convertTo(m, CV_8U, m.depth() == CV_16U ? 1.0 / 257 : 1.0);
  return m;
}

cv::Mat load(const std::string& path, Role role) { return decode_file(read_bytes(path), path, role); }

// --encoding keep: the file's own bytes (a JPEG stays the JPEG it was: no
// second lossy encode, and the reader can decode it at reduced scale).
EncodedImage keep_file(const std::string& path, const ConvertOptions& o) {
  if (o.resize_h > 0)
    throw ConfigError("convert: --encoding keep with --resize", "expected one of them",
                      "drop --resize, or choose png or jpeg");
  EncodedImage e;
  e.bytes = read_bytes(path);
  const cv::Mat m = decode_file(e.bytes, path);  // checks that it decodes, and gives the size the record states
  const auto starts = [&](const char* magic, size_t n) {
    return e.bytes.size() >= n && e.bytes.compare(0, n, magic, n) == 0;
  };
  if (starts("\xFF\xD8\xFF", 3))
    e.encoding = ImageEncoding::jpeg;
  else if (starts("\x89PNG\r\n\x1A\n", 8))
    e.encoding = ImageEncoding::png;
  else
    throw ConfigError("convert: " + path + ": neither a JPEG nor a PNG file",
                      "expected JPEG or PNG files with --encoding keep", "choose --encoding png or jpeg to re-encode");
  e.rows = uint32_t(m.rows);
  e.cols = uint32_t(m.cols);
  e.channels = uint8_t(m.channels());
  return e;
}

}  // namespace

std::vector<EncodedImage> encode_images(const Source& s, const Item& item, const ConvertOptions& o) {
  std::vector<EncodedImage> images;
  if (item.idx_index >= 0) {
    cv::Mat m(s.idx_rows, s.idx_cols, CV_8UC1,
              const_cast<uint8_t*>(&s.idx_pixels[size_t(item.idx_index) * size_t(s.idx_rows * s.idx_cols)]));
    images.push_back(encode(m, o, "sample " + item.id));
  } else {
    for (size_t i = 0; i < item.files.size(); ++i) {
      const std::string& f = item.files[i];
      const Role role = static_cast<int64_t>(i) < s.input_images ? Role::input : Role::target;
      cv::Size decoded;  // before --resize: a kept file's own size, else the decoded image's
      EncodedImage image;
      if (o.encoding == "keep") {
        image = keep_file(f, o);
        decoded = cv::Size(int(image.cols), int(image.rows));
      } else {
        const cv::Mat m = load(f, role);
        decoded = m.size();
        image = encode(m, o, f, role);
      }
      if (item.coco_image >= 0) {  // its annotations are drawn on the JSON's size: the file must have it
        const coco::Image& entry = s.coco_images[static_cast<size_t>(item.coco_image)];
        if (decoded != cv::Size(entry.cols, entry.rows))
          throw ConfigError("convert: " + f + ": " + std::to_string(decoded.height) + "x" +
                                std::to_string(decoded.width) + " pixels, and " + o.inputs[0] + " says image " +
                                std::to_string(entry.id) + " is " + std::to_string(entry.rows) + "x" +
                                std::to_string(entry.cols),
                            "expected the size the JSON gives (its annotations are in those pixels)",
                            "fix the image's height and width in the JSON, or the file");
      }
      // A target kept as a JPEG would be a lossy mask: such a file is stored as a PNG instead.
      if (role == Role::target && image.encoding != ImageEncoding::png) image = encode(load(f, role), o, f, role);
      images.push_back(std::move(image));
    }
  }
  if (item.coco_image >= 0 && !s.coco_boxes) {
    const coco::Image& image = s.coco_images[static_cast<size_t>(item.coco_image)];
    cv::Mat mask = coco::paint_mask(image, s.coco_crowd);
    if (s.coco_crowd <= 255) mask.convertTo(mask, CV_8U);  // every id fits in 8 bits
    images.push_back(encode(mask, o, item.files[0] + " (its COCO annotations)", Role::target));
  }
  return images;
}

Label box_label(const Source& s, const Item& item, uint32_t stored_rows, uint32_t stored_cols) {
  const coco::Image& image = s.coco_images.at(static_cast<size_t>(item.coco_image));
  const double sx = double(stored_cols) / image.cols, sy = double(stored_rows) / image.rows;
  std::vector<float> values;
  for (const coco::Region& r : image.regions) {
    if (!r.box) continue;
    const coco::Box& b = *r.box;
    const double area = coco::region_area(r);
    for (const double v :
         {b[0] * sx, b[1] * sy, b[2] * sx, b[3] * sy, double(r.category), r.crowd ? 1.0 : 0.0, area * sx * sy})
      values.push_back(static_cast<float>(v));
  }
  return Label::boxes(std::move(values));
}

}  // namespace trainyard::host
