// lmdb: reads trainyard's record format (docs/lmdb-format.md) from an LMDB
// environment opened read-only; every get() uses its own read transaction,
// so any number of decode threads can read at once. A database of records
// with boxes (format version 2, `convert --from coco --coco-target boxes`)
// is read with target: boxes, its boxes as the sample's fields.
#include <lmdb.h>

#include <filesystem>

#include <ATen/ATen.h>
#include <trainyard/error.h>
#include <trainyard/record.h>

#include "annotated_dataset.h"

namespace image_datasets {
namespace {

using trainyard::ConfigError;
using trainyard::DataError;

// The environment, opened read-only, and its metadata, checked.
class RecordStore {
 public:
  explicit RecordStore(const std::string& path) : path_(path) {
    if (!std::filesystem::exists(path_))
      throw ConfigError("database '" + path_ + "' does not exist", "expected an LMDB folder made by trainyard convert",
                        "run: trainyard convert --from idx ... --output " + path_);
    check(mdb_env_create(&env_), "create the environment");
    // NOTLS: read transactions are not tied to threads (decode threads share the env).
    const bool is_file = std::filesystem::is_regular_file(path_);
    check(mdb_env_open(env_, path_.c_str(), MDB_RDONLY | MDB_NOTLS | (is_file ? MDB_NOSUBDIR : 0), 0664),
          "open it read-only");
    MDB_txn* txn = nullptr;
    check(mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn), "begin a read transaction");
    int rc = mdb_dbi_open(txn, nullptr, 0, &dbi_);
    MDB_val key{std::strlen(trainyard::kMetadataKey), const_cast<char*>(trainyard::kMetadataKey)}, value;
    if (rc == 0) rc = mdb_get(txn, dbi_, &key, &value);
    if (rc != 0) {
      mdb_txn_abort(txn);
      close();
      throw DataError("database '" + path_ + "' has no trainyard metadata entry (" + mdb_strerror(rc) + ")",
                      "expected a database written by trainyard convert", "convert the data with trainyard convert");
    }
    std::string text(static_cast<const char*>(value.mv_data), value.mv_size);
    MDB_stat stat{};
    const int stat_rc = mdb_stat(txn, dbi_, &stat);
    // The last record the metadata promises, looked up now rather than found missing mid-run.
    MDB_val last_value;
    std::string last_key;
    try {
      meta_ = trainyard::decode_metadata(text);
      last_key = trainyard::record_key(std::max<int64_t>(0, meta_.count - 1));
    } catch (const trainyard::Error& e) {
      mdb_txn_abort(txn);
      close();
      throw DataError("database '" + path_ + "': bad metadata: " + e.what(),
                      "expected format version " + std::to_string(trainyard::kRecordFormatVersion) + " or " +
                          std::to_string(trainyard::kBoxesRecordFormatVersion),
                      "convert the data again");
    }
    MDB_val last{last_key.size(), last_key.data()};
    const bool last_found = meta_.count == 0 || mdb_get(txn, dbi_, &last, &last_value) == 0;
    mdb_txn_abort(txn);
    const int64_t records = stat_rc == 0 ? static_cast<int64_t>(stat.ms_entries) - 1 : -1;  // less the metadata entry
    if (meta_.count <= 0) {
      close();
      throw DataError(
          "database '" + path_ + "' holds no samples (its metadata says " + std::to_string(meta_.count) + ")",
          "expected at least one record", "convert the data again");
    }
    if ((records >= 0 && records < meta_.count) || !last_found) {
      close();
      throw DataError("database '" + path_ + "': its metadata says " + std::to_string(meta_.count) + " records, but " +
                          (last_found ? "it holds " + std::to_string(records) : "record " + last_key + " is missing"),
                      "expected every record the metadata counts",
                      "the database is incomplete: convert the data again");
    }
  }
  RecordStore(const RecordStore&) = delete;
  RecordStore& operator=(const RecordStore&) = delete;
  ~RecordStore() { close(); }

  const trainyard::DatasetMetadata& meta() const { return meta_; }
  const std::string& path() const { return path_; }
  bool holds_boxes() const { return meta_.format_version == trainyard::kBoxesRecordFormatVersion; }

  /// Record `index`, decoded; throws BadRecord naming it ("record 0000000012: ...").
  trainyard::Record read(int64_t index) const {
    const std::string key_text = trainyard::record_key(index);
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
    if (rc != 0) throw trainyard::Error(path_ + ": cannot begin a read transaction: " + mdb_strerror(rc));
    struct Abort {
      MDB_txn* t;
      ~Abort() { mdb_txn_abort(t); }
    } abort{txn};
    MDB_val key{key_text.size(), const_cast<char*>(key_text.data())}, value;
    rc = mdb_get(txn, dbi_, &key, &value);
    if (rc != 0) throw trainyard::BadRecord(name(index) + ": " + mdb_strerror(rc));
    try {
      return trainyard::decode_record(value.mv_data, value.mv_size);
    } catch (const trainyard::BadRecord& e) {
      throw trainyard::BadRecord(name(index) + ": " + e.what());
    }
  }
  static std::string name(int64_t index) { return "record " + trainyard::record_key(index); }

 private:
  void close() {
    if (env_) mdb_env_close(env_), env_ = nullptr;
  }
  void check(int rc, const std::string& action) {
    if (rc == 0) return;
    close();
    throw ConfigError("database '" + path_ + "': cannot " + action + ": " + mdb_strerror(rc),
                      "expected a readable LMDB made by trainyard convert",
                      rc == EAGAIN || rc == EBUSY ? "another process holds it locked; wait or copy it"
                                                  : "check the path and its permissions");
  }
  std::string path_;
  MDB_env* env_ = nullptr;
  MDB_dbi dbi_ = 0;
  trainyard::DatasetMetadata meta_;
};

// A record's images as a sample's: the first input_images its inputs, the rest its targets.
LoadedSample images_of(trainyard::Record& record, int64_t index, int64_t input_images) {
  const std::string what = RecordStore::name(index);
  LoadedSample s;
  for (size_t i = 0; i < record.images.size(); ++i) {
    auto& im = record.images[i];
    SourceImage image;
    image.expected_size = cv::Size(static_cast<int>(im.cols), static_cast<int>(im.rows));
    image.what = what + " image " + std::to_string(i);
    if (im.encoding == trainyard::ImageEncoding::raw) {
      image.pixels = cv::Mat(image.expected_size, CV_8UC(im.channels), const_cast<char*>(im.bytes.data())).clone();
    } else {
      image.what += std::string(" (") + encoding_name(im.encoding) + ")";
      image.bytes = std::move(im.bytes);
    }
    (static_cast<int64_t>(i) < input_images ? s.inputs : s.targets).push_back(std::move(image));
  }
  if (s.inputs.empty()) throw trainyard::BadRecord(what + ": no input image");
  return s;
}

class Lmdb : public ImageDataset {
 public:
  explicit Lmdb(const PathDatasetOptions& o) : ImageDataset(checked_transforms(o)), store_(o.path) {
    if (store_.holds_boxes())
      throw ConfigError("database '" + store_.path() + "' holds boxes (format version 2), and target is " + o.target,
                        "expected target: boxes for a database of boxes", "add target: boxes");
    const auto& meta = store_.meta();
    describe(static_cast<int64_t>(meta.class_names.size()), meta.class_names, "database '" + store_.path() + "'");
  }
  int64_t size() const override { return store_.meta().count; }

 protected:
  LoadedSample load(int64_t index) const override {
    trainyard::Record record = store_.read(index);
    LoadedSample s = images_of(record, index, store_.meta().input_images);
    if (s.targets.empty()) {
      if (record.labels.empty())
        throw trainyard::BadRecord(RecordStore::name(index) + ": neither a label nor a target image");
      const auto& l = record.labels[0];
      if (l.kind == trainyard::Label::Kind::boxes)
        throw trainyard::BadRecord(RecordStore::name(index) +
                                   ": a boxes label in a database without boxes (its metadata says format version " +
                                   std::to_string(store_.meta().format_version) + ")");
      s.label = l.kind == trainyard::Label::Kind::class_index
                    ? at::scalar_tensor(l.index, at::kLong)
                    : at::tensor(at::ArrayRef<float>(l.values.data(), l.values.size()), at::kFloat);
    }
    return s;
  }

 private:
  RecordStore store_;
};

// target: boxes: each record's image and its boxes label.
class LmdbBoxes : public AnnotatedImageDataset {
 public:
  explicit LmdbBoxes(const PathDatasetOptions& o) : AnnotatedImageDataset(checked_transforms(o)), store_(o.path) {
    const auto& meta = store_.meta();
    if (!store_.holds_boxes())
      throw ConfigError("target: boxes, and database '" + store_.path() + "' holds no boxes (format version " +
                            std::to_string(meta.format_version) + ")",
                        "expected a database of boxes (format version 2)",
                        "convert it with trainyard convert --from coco --coco-target boxes, or drop target: boxes");
    if (meta.class_names.empty())
      throw DataError("database '" + store_.path() + "' holds boxes and names no classes",
                      "expected class= lines in its metadata (convert writes the categories)", "convert it again");
    describe(static_cast<int64_t>(meta.class_names.size()), meta.class_names, "database '" + store_.path() + "'");
  }
  int64_t size() const override { return store_.meta().count; }

 protected:
  AnnotatedSample read_annotated(int64_t index) const override {
    trainyard::Record record = store_.read(index);
    AnnotatedSample out;
    out.sample = images_of(record, index, /*input_images=*/1);
    if (!out.sample.targets.empty())
      throw trainyard::BadRecord(RecordStore::name(index) + ": " + std::to_string(record.images.size()) +
                                 " images; a record of boxes holds one");
    out.annotations.boxes = boxes_of(record, index);
    out.annotations.stored = out.sample.inputs[0].expected_size;  // the record's rows and columns
    check_stored_boxes(out.annotations.boxes, out.annotations.stored,
                       static_cast<int64_t>(store_.meta().class_names.size()), RecordStore::name(index));
    return out;
  }

 private:
  static std::vector<StoredBox> boxes_of(const trainyard::Record& record, int64_t index) {
    const trainyard::Label* boxes = nullptr;
    for (const auto& l : record.labels)
      if (l.kind == trainyard::Label::Kind::boxes) boxes = &l;
    if (!boxes) throw trainyard::BadRecord(RecordStore::name(index) + ": no boxes label in a database of boxes");
    return boxes_of_label(boxes->values, RecordStore::name(index));
  }
  RecordStore store_;
};

const trainyard::TypedSchema<PathDatasetOptions>& lmdb_typed_schema() {
  static const auto s = path_dataset_schema(
      "path", "LMDB folder written by 'trainyard convert'; relative to the experiment file", /*boxes=*/true);
  return s;
}

}  // namespace

trainyard::Schema lmdb_schema() { return lmdb_typed_schema().schema(); }

std::shared_ptr<trainyard::Dataset> make_lmdb(const trainyard::Options& options) {
  const PathDatasetOptions o = lmdb_typed_schema().bind(options);
  if (o.target == "boxes") return std::make_shared<LmdbBoxes>(o);
  return std::make_shared<Lmdb>(o);
}

}  // namespace image_datasets
