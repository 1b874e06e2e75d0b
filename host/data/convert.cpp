#include "data/convert.h"

#include <lmdb.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>

#include <opencv2/imgproc.hpp>

#include "trainyard/error.h"
#include "trainyard/image_codec.h"
#include "trainyard/labeled_files.h"
#include "trainyard/random.h"
#include "trainyard/record.h"
#include "util/files.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

// One sample to convert: where its images come from, and its label.
struct Item {
  std::vector<std::string> files;  ///< image files (inputs then targets), or empty for idx
  int64_t idx_index = -1;          ///< row in the idx arrays
  int64_t label = -1;              ///< class index, -1 for none
  std::string id;
};

struct Source {
  std::vector<Item> items;
  std::vector<std::string> class_names;
  int64_t input_images = 1;
  std::string description;
  // idx: the arrays in memory
  std::vector<uint8_t> idx_pixels;
  int idx_rows = 0, idx_cols = 0;
};

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
        fs::path p = fs::path(d) / name;
        if (!fs::exists(p))
          throw ConfigError("convert: '" + name + "' is in " + dirs[0] + " but not in " + d,
                            "expected the same file names in every parallel folder", "");
        item.files.push_back(p.string());
      }
      s.items.push_back(std::move(item));
    }
    s.input_images = int64_t(o.inputs.size());
    s.description = "parallel " + join(dirs);
  } else {
    throw ConfigError("convert: unknown --from '" + o.from + "'", "expected one of folder, csv, idx, parallel",
                      did_you_mean(o.from, {"folder", "csv", "idx", "parallel"}));
  }
  if (s.items.empty())
    throw ConfigError("convert: the source holds no samples (" + s.description + ")", "expected images", "");
  return s;
}

EncodedImage encode(const cv::Mat& image, const ConvertOptions& o, const std::string& what) {
  cv::Mat m = image;
  if (o.resize_h > 0 && (m.rows != o.resize_h || m.cols != o.resize_w))
    cv::resize(m, m, cv::Size(o.resize_w, o.resize_h), 0, 0, m.rows > o.resize_h ? cv::INTER_AREA : cv::INTER_LINEAR);
  EncodedImage e;
  e.rows = uint32_t(m.rows);
  e.cols = uint32_t(m.cols);
  e.channels = uint8_t(m.channels());
  if (o.encoding == "raw") {
    e.encoding = ImageEncoding::raw;
    cv::Mat c = m.isContinuous() ? m : m.clone();
    e.bytes.assign(reinterpret_cast<const char*>(c.data), c.total() * c.elemSize());
    return e;
  }
  try {
    e.bytes = o.encoding == "png" ? image_codec::encode_png(m) : image_codec::encode_jpeg(m, o.quality);
  } catch (const image_codec::Error& failure) {
    throw Error("convert: cannot encode " + what + " as " + o.encoding + ": " + failure.what());
  }
  e.encoding = o.encoding == "png" ? ImageEncoding::png : ImageEncoding::jpeg;
  return e;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The image in a file's bytes, as a record stores it: 8-bit, BGR or gray.
cv::Mat decode_file(const std::string& bytes, const std::string& path) {
  cv::Mat m;
  try {
    m = image_codec::decode(bytes.data(), bytes.size());
  } catch (const image_codec::Error& e) {
    throw ConfigError("convert: " + path + ": cannot read or decode the image (" + e.what() + ")",
                      "expected a JPEG, PNG, BMP, TIFF, WebP or PNM file", "remove or fix the file");
  }
  if (m.channels() == 4) cv::cvtColor(m, m, cv::COLOR_BGRA2BGR);
  if (m.depth() != CV_8U) m.convertTo(m, CV_8U, m.depth() == CV_16U ? 1.0 / 257 : 1.0);
  return m;
}

cv::Mat load(const std::string& path) { return decode_file(read_bytes(path), path); }

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

class Progress {
 public:
  Progress(bool on, int64_t total) : on_(on), tty_(::isatty(STDERR_FILENO)), total_(total), t0_(Clock::now()) {}
  void update(int64_t done) {
    if (!on_) return;
    double elapsed = std::chrono::duration<double>(Clock::now() - t0_).count();
    int percent = int(100 * done / std::max<int64_t>(1, total_));
    if (!tty_ && percent < next_percent_ && done != total_) return;
    if (tty_ && elapsed - last_ < 0.2 && done != total_) return;
    last_ = elapsed;
    next_percent_ = percent + 10;
    double rate = done / std::max(elapsed, 1e-9);
    long eta = long((total_ - done) / std::max(rate, 1e-9));
    const int width = 30, filled = int(width * done / std::max<int64_t>(1, total_));
    std::fprintf(stderr, "%sconvert [%s%s] %lld/%lld %.0f records/s ETA %ld:%02ld%s", tty_ ? "\r\033[K" : "",
                 std::string(size_t(filled), '=').c_str(), std::string(size_t(width - filled), ' ').c_str(),
                 (long long)done, (long long)total_, rate, eta / 60, eta % 60, tty_ ? "" : "\n");
    if (tty_ && done == total_) std::fprintf(stderr, "\n");
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_, tty_;
  int64_t total_;
  Clock::time_point t0_;
  double last_ = -1;
  int next_percent_ = 0;
};

// A sample's images as stored: the idx row's pixels, or each file, encoded
// (or kept as it is, with --encoding keep).
std::vector<EncodedImage> encode_images(const Source& s, const Item& item, const ConvertOptions& o) {
  std::vector<EncodedImage> images;
  if (item.idx_index >= 0) {
    cv::Mat m(s.idx_rows, s.idx_cols, CV_8UC1,
              const_cast<uint8_t*>(&s.idx_pixels[size_t(item.idx_index) * size_t(s.idx_rows * s.idx_cols)]));
    images.push_back(encode(m, o, "sample " + item.id));
  } else {
    for (const auto& f : item.files) images.push_back(o.encoding == "keep" ? keep_file(f, o) : encode(load(f), o, f));
  }
  return images;
}

void lmdb_check(int rc, const std::string& what) {
  if (rc != 0) throw Error("convert: LMDB: " + what + ": " + mdb_strerror(rc));
}

// Writes records[order] to a new LMDB at `dir`.
void write_database(const std::string& dir, const Source& s, const std::vector<size_t>& order, const ConvertOptions& o,
                    Progress& progress, int64_t& done) {
  fs::create_directories(dir);
  MDB_env* env = nullptr;
  lmdb_check(mdb_env_create(&env), "create");
  struct Close {
    MDB_env* e;
    ~Close() { mdb_env_close(e); }
  } close{env};
  lmdb_check(mdb_env_set_mapsize(env, size_t(1) << 40), "set the map size");  // sparse: grows as written
  lmdb_check(mdb_env_open(env, dir.c_str(), MDB_NOSYNC, 0664), "open " + dir);
  MDB_txn* txn = nullptr;
  MDB_dbi dbi;
  lmdb_check(mdb_txn_begin(env, nullptr, 0, &txn), "begin");
  lmdb_check(mdb_dbi_open(txn, nullptr, 0, &dbi), "open the database");
  DatasetMetadata meta;
  meta.count = int64_t(order.size());
  meta.class_names = s.class_names;
  meta.input_images = s.input_images;
  meta.source = s.description;
  for (size_t r = 0; r < order.size(); ++r) {
    const Item& item = s.items[order[r]];
    Record record;
    record.images = encode_images(s, item, o);
    if (item.label >= 0) record.labels.push_back(Label::class_index(item.label));
    record.id = item.id;
    if (r == 0)
      for (const auto& im : record.images)
        meta.image_shapes.push_back(std::to_string(im.rows) + "x" + std::to_string(im.cols) + "x" +
                                    std::to_string(im.channels));
    std::string key = record_key(int64_t(r)), value = encode_record(record);
    MDB_val k{key.size(), key.data()}, v{value.size(), value.data()};
    lmdb_check(mdb_put(txn, dbi, &k, &v, MDB_APPEND), "write record " + key);  // keys arrive sorted
    if ((r + 1) % 1000 == 0) {
      lmdb_check(mdb_txn_commit(txn), "commit");
      lmdb_check(mdb_txn_begin(env, nullptr, 0, &txn), "begin");
    }
    progress.update(++done);
  }
  std::string key = kMetadataKey, value = encode_metadata(meta);
  MDB_val k{key.size(), key.data()}, v{value.size(), value.data()};
  lmdb_check(mdb_put(txn, dbi, &k, &v, 0), "write the metadata");
  lmdb_check(mdb_txn_commit(txn), "commit");
  lmdb_check(mdb_env_sync(env, 1), "sync");
}

// One tar member: a ustar header (mode 0644, owner 0, time 0, so the same
// input gives the same bytes), the data, zeros to the next 512-byte block.
void write_tar_member(std::ofstream& out, const std::string& name, const std::string& data) {
  char h[512] = {};
  std::memcpy(h, name.data(), std::min<size_t>(name.size(), 99));
  std::snprintf(h + 100, 8, "%07o", 0644u);
  std::snprintf(h + 108, 8, "%07o", 0u);
  std::snprintf(h + 116, 8, "%07o", 0u);
  std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(data.size()));
  std::snprintf(h + 136, 12, "%011o", 0u);
  h[156] = '0';
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (char c : h) sum += static_cast<unsigned char>(c);
  std::snprintf(h + 148, 8, "%06o", sum);
  h[155] = ' ';
  out.write(h, sizeof h);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  const size_t pad = (512 - data.size() % 512) % 512;
  static const char zeros[512] = {};
  out.write(zeros, static_cast<std::streamsize>(pad));
}

void end_tar(std::ofstream& out) {
  static const char zeros[1024] = {};
  out.write(zeros, sizeof zeros);  // two zero blocks end a tar
  out.close();
}

std::string shard_name(int64_t shard) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%06lld.tar", static_cast<long long>(shard));
  return name;
}

// Writes records[order] as tar shards of o.shard_size samples under `dir`:
// KEY.jpg|png (the image as encoded for an LMDB record) and KEY.cls (the
// class index as text), KEY being the sample's position, zero-padded.
std::string write_shards(const std::string& dir, const Source& s, const std::vector<size_t>& order,
                         const ConvertOptions& o, Progress& progress, int64_t& done) {
  fs::create_directories(dir);
  std::ofstream out;
  int64_t shard = -1;
  for (size_t r = 0; r < order.size(); ++r) {
    const Item& item = s.items[order[r]];
    if (item.label < 0 || (item.idx_index < 0 && item.files.size() != 1))
      throw ConfigError("convert --to webdataset: sample " + item.id + " is not one image with a class",
                        "a folder, csv or idx source", "write an LMDB (--to lmdb) for parallel folders");
    const EncodedImage image = std::move(encode_images(s, item, o).front());
    if (int64_t(r) / o.shard_size != shard) {
      shard = int64_t(r) / o.shard_size;
      if (out.is_open()) end_tar(out);
      out.open(dir + "/" + shard_name(shard), std::ios::binary);
      if (!out) throw Error("convert: cannot create " + dir + "/" + shard_name(shard));
    }
    char key[32];
    std::snprintf(key, sizeof key, "%09zu", r);
    const auto format = image.encoding == ImageEncoding::png ? image_codec::Format::png : image_codec::Format::jpeg;
    write_tar_member(out, std::string(key) + "." + image_codec::extension_of(format), image.bytes);
    write_tar_member(out, std::string(key) + ".cls", std::to_string(item.label));
    progress.update(++done);
  }
  end_tar(out);
  if (!out) throw Error("convert: cannot finish writing " + dir + "/" + shard_name(shard));
  char last[16];
  std::snprintf(last, sizeof last, "%06lld", static_cast<long long>(shard));
  return "shard-{000000.." + std::string(last) + "}.tar";
}

// A folder an earlier convert wrote: an LMDB (data.mdb), tar shards, or
// train/ and test/ holding those. Only such a folder is replaced by --overwrite.
bool written_by_convert(const fs::path& dir, bool split_allowed = true) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || fs::is_symlink(dir, ec)) return false;
  if (fs::is_regular_file(dir / "data.mdb", ec)) return true;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().filename().string().rfind("shard-", 0) == 0 && entry.path().extension() == ".tar") return true;
  return split_allowed && written_by_convert(dir / "train", false) && written_by_convert(dir / "test", false);
}

// True when `inner` is `outer` or lies inside it (both made absolute, links resolved where they exist).
bool inside(const fs::path& inner, const fs::path& outer) {
  std::error_code ec;
  const fs::path a = fs::weakly_canonical(fs::absolute(inner), ec).lexically_normal();
  const fs::path b = fs::weakly_canonical(fs::absolute(outer), ec).lexically_normal();
  auto ai = a.begin();
  for (auto bi = b.begin(); bi != b.end(); ++bi, ++ai) {
    if (bi->empty() && std::next(bi) == b.end()) break;  // a trailing "/" of b
    if (ai == a.end() || *ai != *bi) return false;
  }
  return true;
}

// The output folder: trailing slashes dropped ("out/" is "out"); never the
// current folder, one above it, or a folder holding the input; with
// --overwrite, replaced only when an earlier convert wrote it. Creates nothing.
fs::path checked_output(const ConvertOptions& o) {
  std::string output = o.output;
  while (output.size() > 1 && output.back() == '/') output.pop_back();
  const fs::path path(output);
  const std::string where = "convert: --output " + o.output;
  const std::string name = path.filename().string();
  if (output == "/" || name == "." || name == ".." || inside(fs::current_path(), path))
    throw ConfigError(
        where + ": is the current folder or one above it",
        "expected the path of a new folder for the output (e.g. " + (path / "data").lexically_normal().string() + ")",
        "name a folder to create; convert never replaces the folder it runs in");
  std::vector<std::string> inputs = o.inputs;
  inputs.insert(inputs.end(), o.targets.begin(), o.targets.end());
  for (const std::string& f : {o.images, o.labels})
    if (!f.empty()) inputs.push_back(f);
  for (const auto& input : inputs)
    if (inside(input, path))
      throw ConfigError(where + ": holds the input " + input, "expected an output folder apart from the inputs",
                        "choose another --output");
  std::error_code ec;
  if (fs::exists(fs::symlink_status(path, ec))) {
    if (!o.overwrite)
      throw ConfigError("convert: '" + o.output + "' already exists", "expected a new output folder",
                        "pass --overwrite to replace it, or choose another --output");
    if (!written_by_convert(path))
      throw ConfigError(where + ": --overwrite replaces only a folder convert wrote",
                        "expected a folder holding data.mdb or shard-*.tar (or train/ and test/ with them), got " +
                            std::string(fs::is_directory(path, ec) ? "a folder without them" : "a file"),
                        "choose another --output, or remove it yourself if it should go");
  }
  check_output_folder(path.has_parent_path() ? path.parent_path().string() : ".", where);
  return path;
}

}  // namespace

ConvertResult convert(const ConvertOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.output.empty()) throw ConfigError("convert: missing --output DIR", "expected the folder to create", "");
  if (o.encoding != "png" && o.encoding != "jpeg" && o.encoding != "raw" && o.encoding != "keep")
    throw ConfigError("convert: --encoding '" + o.encoding + "'", "expected one of png, jpeg, raw, keep",
                      did_you_mean(o.encoding, {"png", "jpeg", "raw", "keep"}));
  if (o.encoding == "keep" && o.from == "idx")
    throw ConfigError("convert --from idx --encoding keep", "expected keep with image files (idx holds pixels)",
                      "choose png, jpeg or raw");
  if (o.to != "lmdb" && o.to != "webdataset")
    throw ConfigError("convert: --to '" + o.to + "'", "expected lmdb or webdataset",
                      did_you_mean(o.to, {"lmdb", "webdataset"}));
  if (o.to == "webdataset" && o.encoding == "raw")
    throw ConfigError("convert --to webdataset --encoding raw", "expected png, jpeg or keep (shards hold image files)",
                      "");
  if (o.shard_size < 1)
    throw ConfigError("convert: --shard-size " + std::to_string(o.shard_size), "expected 1 or more", "");
  if (o.quality < 1 || o.quality > 100)
    throw ConfigError("convert: --quality " + std::to_string(o.quality), "expected 1..100", "");
  if (o.test_fraction < 0 || o.test_fraction >= 1)
    throw ConfigError("convert: --test-fraction " + std::to_string(o.test_fraction), "expected a fraction in [0, 1)",
                      "");
  const fs::path final_path = checked_output(o);
  Source source = read_source(o);

  std::vector<size_t> order(source.items.size());
  std::iota(order.begin(), order.end(), 0);
  if (o.shuffle) {  // splitmix64 Fisher-Yates: the same order for the same seed everywhere
    SplitMix64 rng(o.seed * 0x9e3779b97f4a7c15ull + 1);
    for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.next() % (i + 1)]);
  }
  if (o.limit > 0 && size_t(o.limit) < order.size()) order.resize(size_t(o.limit));
  // Both splits hold samples, or nothing is written.
  const size_t test = o.test_fraction > 0 ? size_t(double(order.size()) * o.test_fraction + 0.5) : 0;
  if (o.test_fraction > 0 && (test == 0 || test >= order.size())) {
    char fraction[32];
    std::snprintf(fraction, sizeof fraction, "%g", o.test_fraction);
    throw ConfigError(
        "convert: --test-fraction " + std::string(fraction) + " of " + std::to_string(order.size()) +
            " samples leaves the " + (test == 0 ? "test" : "training") + " split empty",
        "expected at least one sample in each split, got " +
            std::to_string(order.size() - std::min(test, order.size())) + " training and " + std::to_string(test) +
            " test",
        test == 0 ? "raise --test-fraction or convert more samples" : "lower --test-fraction or convert more samples");
  }

  // Everything goes to a temporary folder next to the output, renamed at the end.
  const fs::path tmp = final_path.string() + ".partial-" + std::to_string(::getpid());
  fs::remove_all(tmp);
  ConvertResult result;
  Progress progress(o.progress, int64_t(order.size()));
  int64_t done = 0;
  try {
    // One output: an LMDB folder, or a folder of shards named by their pattern.
    auto write = [&](const fs::path& at, const fs::path& final_at, const std::vector<size_t>& part) {
      if (o.to == "lmdb") {
        write_database(at.string(), source, part, o, progress, done);
        result.databases.push_back(final_at.string());
      } else {
        result.databases.push_back((final_at / write_shards(at.string(), source, part, o, progress, done)).string());
      }
    };
    if (o.test_fraction > 0) {
      std::vector<size_t> train_order(order.begin(), order.end() - long(test)),
          test_order(order.end() - long(test), order.end());
      write(tmp / "train", final_path / "train", train_order);
      write(tmp / "test", final_path / "test", test_order);
    } else {
      write(tmp, final_path, order);
    }
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }
  std::error_code ec;
  auto fail = [&](const std::string& what) {
    const std::string why = ec.message();
    fs::remove_all(tmp, ec);
    throw Error("convert: " + what + ": " + why);
  };
  if (fs::exists(fs::symlink_status(final_path,
                                    ec))) {  // --overwrite: the old one moves away only once the new one is complete
    const fs::path old = final_path.string() + ".old-" + std::to_string(::getpid());
    fs::rename(final_path, old, ec);
    if (ec) fail("cannot move the old " + final_path.string() + " aside");
    fs::rename(tmp, final_path, ec);
    if (ec) {
      std::error_code back;
      fs::rename(old, final_path, back);  // the old one stays as it was
      fail("cannot rename the new output into place as " + final_path.string());
    }
    fs::remove_all(old, ec);
  } else {
    fs::rename(tmp, final_path, ec);
    if (ec) fail("cannot rename the new output into place as " + final_path.string());
  }
  result.written = done;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace trainyard::host
