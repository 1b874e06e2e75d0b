// lmdb: reads trainyard's record format (docs/lmdb-format.md) from an LMDB
// environment opened read-only; every get() uses its own read transaction,
// so any number of decode threads can read at once.
#include <lmdb.h>

#include <filesystem>

#include <ATen/ATen.h>
#include <trainyard/error.h>
#include <trainyard/record.h>

#include "image_dataset.h"

namespace image_datasets {
namespace {

using trainyard::ConfigError;
using trainyard::DataError;

class Lmdb : public ImageDataset {
 public:
  explicit Lmdb(const PathDatasetOptions& o) : ImageDataset(checked_transforms(o)), path_(o.path) {
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
      throw DataError("database '" + path_ + "': bad metadata: " + e.what(),
                      "expected format version " + std::to_string(trainyard::kRecordFormatVersion),
                      "convert the data again");
    }
    MDB_val last{last_key.size(), last_key.data()};
    const bool last_found = meta_.count == 0 || mdb_get(txn, dbi_, &last, &last_value) == 0;
    mdb_txn_abort(txn);
    const int64_t records = stat_rc == 0 ? static_cast<int64_t>(stat.ms_entries) - 1 : -1;  // less the metadata entry
    if (meta_.count <= 0)
      throw DataError(
          "database '" + path_ + "' holds no samples (its metadata says " + std::to_string(meta_.count) + ")",
          "expected at least one record", "convert the data again");
    if ((records >= 0 && records < meta_.count) || !last_found)
      throw DataError("database '" + path_ + "': its metadata says " + std::to_string(meta_.count) + " records, but " +
                          (last_found ? "it holds " + std::to_string(records) : "record " + last_key + " is missing"),
                      "expected every record the metadata counts",
                      "the database is incomplete: convert the data again");
    describe(static_cast<int64_t>(meta_.class_names.size()), meta_.class_names, "database '" + path_ + "'");
  }
  ~Lmdb() override {
    if (env_) mdb_env_close(env_);
  }
  int64_t size() const override { return meta_.count; }

 protected:
  LoadedSample load(int64_t index) const override {
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
    const std::string what = "record " + key_text;
    if (rc != 0) throw trainyard::BadRecord(what + ": " + mdb_strerror(rc));
    trainyard::Record record;
    try {
      record = trainyard::decode_record(value.mv_data, value.mv_size);
    } catch (const trainyard::BadRecord& e) {
      throw trainyard::BadRecord(what + ": " + e.what());
    }
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
      (static_cast<int64_t>(i) < meta_.input_images ? s.inputs : s.targets).push_back(std::move(image));
    }
    if (s.inputs.empty()) throw trainyard::BadRecord(what + ": no input image");
    if (s.targets.empty()) {
      if (record.labels.empty()) throw trainyard::BadRecord(what + ": neither a label nor a target image");
      const auto& l = record.labels[0];
      s.label = l.kind == trainyard::Label::Kind::class_index
                    ? at::scalar_tensor(l.index, at::kLong)
                    : at::tensor(at::ArrayRef<float>(l.values.data(), l.values.size()), at::kFloat);
    }
    return s;
  }

 private:
  void check(int rc, const std::string& action) {
    if (rc == 0) return;
    if (env_) mdb_env_close(env_), env_ = nullptr;
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

const trainyard::TypedSchema<PathDatasetOptions>& lmdb_typed_schema() {
  static const auto s =
      path_dataset_schema("path", "LMDB folder written by 'trainyard convert'; relative to the experiment file");
  return s;
}

}  // namespace

trainyard::Schema lmdb_schema() { return lmdb_typed_schema().schema(); }

std::shared_ptr<trainyard::Dataset> make_lmdb(const trainyard::Options& options) {
  return std::make_shared<Lmdb>(lmdb_typed_schema().bind(options));
}

}  // namespace image_datasets
