#include "data/convert.h"

#include <lmdb.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>

#include "data/convert_source.h"
#include "trainyard/error.h"
#include "trainyard/image_codec.h"
#include "trainyard/random.h"
#include "trainyard/record.h"
#include "util/files.h"
#include "util/json.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

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
  if (s.coco_boxes) meta.format_version = kBoxesRecordFormatVersion;  // older readers refuse the database
  for (size_t r = 0; r < order.size(); ++r) {
    const Item& item = s.items[order[r]];
    Record record;
    record.images = encode_images(s, item, o);
    if (item.label >= 0) record.labels.push_back(Label::class_index(item.label));
    if (s.coco_boxes) record.labels.push_back(box_label(s, item, record.images[0].rows, record.images[0].cols));
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

// A record's boxes label as a shard's KEY.boxes.json: {"height": H,
// "width": W (the stored image's), "boxes": [[x1, y1, x2, y2], ...],
// "labels": [...], "crowd": [0|1, ...], "area": [...]}, each float32 in its
// shortest text, so the webdataset reader gets the LMDB's values.
std::string boxes_json(const Label& label, const EncodedImage& image) {
  nlohmann::ordered_json boxes = nlohmann::ordered_json::array(), labels = boxes, crowd = boxes, area = boxes;
  const std::vector<float>& v = label.values;
  for (size_t k = 0; k + kBoxLabelValues <= v.size(); k += kBoxLabelValues) {
    boxes.push_back(
        {shortest_float(v[k]), shortest_float(v[k + 1]), shortest_float(v[k + 2]), shortest_float(v[k + 3])});
    labels.push_back(static_cast<int64_t>(v[k + 4]));
    crowd.push_back(static_cast<int64_t>(v[k + 5]));
    area.push_back(shortest_float(v[k + 6]));
  }
  return json_text({{"height", image.rows},
                    {"width", image.cols},
                    {"boxes", boxes},
                    {"labels", labels},
                    {"crowd", crowd},
                    {"area", area}});
}

// Writes records[order] as tar shards of o.shard_size samples under `dir`:
// KEY.jpg|png (the image as encoded for an LMDB record) and KEY.cls (the
// class index as text), or, for parallel folders of images and masks and
// for a COCO file's painted masks, KEY.mask.png (the target, lossless), or
// for a COCO file's boxes KEY.boxes.json (boxes_json); KEY is the sample's
// position, zero-padded.
std::string write_shards(const std::string& dir, const Source& s, const std::vector<size_t>& order,
                         const ConvertOptions& o, Progress& progress, int64_t& done) {
  fs::create_directories(dir);
  std::ofstream out;
  int64_t shard = -1;
  for (size_t r = 0; r < order.size(); ++r) {
    const Item& item = s.items[order[r]];
    const bool with_boxes = s.coco_boxes;
    const bool with_mask =
        !with_boxes && item.label < 0 && s.input_images == 1 && (item.files.size() == 2 || item.coco_image >= 0);
    if (!with_mask && !with_boxes && (item.label < 0 || (item.idx_index < 0 && item.files.size() != 1)))
      throw ConfigError("convert --to webdataset: sample " + item.id + " is not one image with a class or a mask",
                        "a folder, csv, idx or coco source, or parallel folders of one --input and one --target",
                        "write an LMDB (--to lmdb) for more parallel folders");
    std::vector<EncodedImage> images = encode_images(s, item, o);
    if (int64_t(r) / o.shard_size != shard) {
      shard = int64_t(r) / o.shard_size;
      if (out.is_open()) end_tar(out);
      out.open(dir + "/" + shard_name(shard), std::ios::binary);
      if (!out) throw Error("convert: cannot create " + dir + "/" + shard_name(shard));
    }
    char key[32];
    std::snprintf(key, sizeof key, "%09zu", r);
    const EncodedImage& image = images.front();
    const auto format = image.encoding == ImageEncoding::png ? image_codec::Format::png : image_codec::Format::jpeg;
    write_tar_member(out, std::string(key) + "." + image_codec::extension_of(format), image.bytes);
    if (with_boxes)
      write_tar_member(out, std::string(key) + ".boxes.json",
                       boxes_json(box_label(s, item, image.rows, image.cols), image));
    else if (with_mask)
      write_tar_member(out, std::string(key) + ".mask.png", images.back().bytes);  // a target: always PNG
    else
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
