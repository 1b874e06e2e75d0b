// trainyard convert and the image datasets: real LMDB files, real PNG and
// JPEG files written by OpenCV, read back through the plugin .so.
#include <gtest/gtest.h>
#include <lmdb.h>

#include <ATen/ATen.h>
#include <algorithm>
#include <filesystem>
#include <opencv2/core.hpp>

#include "plugins/library_loader.h"
#include "support/support.h"
#include "trainyard/dataset.h"
#include "trainyard/error.h"
#include "trainyard/image_codec.h"
#include "trainyard/record.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

using test::contains;

const std::string kFashion = "/usr/share/datasets/fashion-mnist";

const Registry& registry() { return test::builtin_registry(); }

// A dataset built by its plugin, with the schema's defaults plus `options`.
std::shared_ptr<Dataset> dataset(const std::string& name, std::map<std::string, Value> options) {
  const Component& c = registry().get(Kind::dataset, name);
  for (const auto& spec : c.schema.specs())
    if (!options.count(spec.key) && spec.default_value) options[spec.key] = *spec.default_value;
  return std::get<Factory<Dataset>>(c.factory)(Options(options), Context{});
}

test::CommandResult convert(const std::string& args) { return test::trainyard("convert --quiet " + args); }

// A sample's pixels: the datasets return them as uint8 (output: uint8, the
// default) or as floats in [0, 1] (output: float).
at::Tensor bytes(const at::Tensor& t) { return t.scalar_type() == at::kByte ? t : t.mul(255).round().to(at::kByte); }

TEST(Convert, IdxToLmdbReturnsIdenticalPixelsAndLabels) {
  const std::string out = test::temp_dir("db");
  for (const char* encoding : {"png", "raw"}) {
    const std::string db = out + "/" + encoding;
    auto r = convert("--from idx --images " + kFashion + "/t10k-images-idx3-ubyte.gz --labels " + kFashion +
                     "/t10k-labels-idx1-ubyte.gz --limit 300 --encoding " + encoding + " --output " + db);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto lmdb = dataset("lmdb", {{"path", db}});
    auto reference =
        dataset("fashion_mnist", {{"split", std::string("test")}, {"normalize", false}, {"limit", int64_t(300)}});
    ASSERT_EQ(lmdb->size(), 300);
    EXPECT_EQ(lmdb->info().num_classes, 10);
    EXPECT_EQ(lmdb->info().sample_shape, (std::vector<int64_t>{1, 28, 28}));
    for (int64_t i : {0, 1, 150, 299}) {
      Example a = lmdb->get(i), b = reference->get(i);
      EXPECT_TRUE(bytes(a.input).equal(bytes(b.input))) << encoding << " sample " << i;
      EXPECT_EQ(a.target.item<int64_t>(), b.target.item<int64_t>()) << i;
    }
  }
}

// Writes PNG or JPEG images: class c's images have value 40 * (c + 1).
void write_images(const fs::path& dir, const std::string& ext, int count, int value, bool color = false) {
  fs::create_directories(dir);
  for (int i = 0; i < count; ++i) {
    cv::Mat m(12, 10, color ? CV_8UC3 : CV_8UC1, cv::Scalar(value, value / 2, value / 4));
    m.at<uint8_t>(0, 0) = uint8_t(i);
    ASSERT_TRUE(ext == ".png" || ext == ".jpg") << ext;
    test::write_file((dir / ("img" + std::to_string(i) + ext)).string(),
                     ext == ".png" ? image_codec::encode_png(m) : image_codec::encode_jpeg(m));
  }
}

TEST(Convert, FolderOfPngAndJpegFilesByClass) {
  const std::string root = test::temp_dir("images"), db = test::temp_dir("db") + "/folder";
  write_images(fs::path(root) / "ant", ".png", 3, 40);
  write_images(fs::path(root) / "bee", ".jpg", 2, 80, true);
  auto r = convert("--from folder --input " + root + " --output " + db + " --encoding png");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "wrote 5 records")) << r.out;
  auto lmdb = dataset("lmdb", {{"path", db}, {"color", std::string("gray")}});
  EXPECT_EQ(lmdb->info().class_names, (std::vector<std::string>{"ant", "bee"}));
  EXPECT_EQ(lmdb->get(0).target.item<int64_t>(), 0);
  EXPECT_EQ(lmdb->get(4).target.item<int64_t>(), 1);
  EXPECT_EQ(bytes(lmdb->get(1).input)[0][5][5].item<uint8_t>(), 40);  // PNG: exact
  // The same files read directly by image_folder give the same pixels (PNG) or close (JPEG).
  auto folder = dataset("image_folder", {{"root", root}, {"color", std::string("gray")}});
  EXPECT_TRUE(bytes(folder->get(1).input).equal(bytes(lmdb->get(1).input)));
  EXPECT_LE((folder->get(3).input - lmdb->get(3).input).abs().max().item<float>(), 1.0f / 255 + 1e-6);
}

TEST(Convert, CsvOfPathsAndLabelNames) {
  const std::string dir = test::temp_dir("images"), db = test::temp_dir("db") + "/csv";
  write_images(dir, ".png", 4, 100);
  test::write_file(dir + "/meta.csv", "path,label\nimg0.png,cat\nimg1.png,dog\nimg2.png,cat\nimg3.png,dog\n");
  auto r = convert("--from csv --input " + dir + "/meta.csv --output " + db + " --encoding jpeg --quality 90");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lmdb = dataset("lmdb", {{"path", db}});
  EXPECT_EQ(lmdb->size(), 4);
  EXPECT_EQ(lmdb->info().class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(lmdb->get(1).target.item<int64_t>(), 1);
  auto csv = dataset("csv", {{"file", dir + "/meta.csv"}});
  EXPECT_EQ(csv->get(2).target.item<int64_t>(), 0);
}

TEST(Convert, ParallelFoldersGiveInputAndTargetImages) {
  const std::string base = test::temp_dir("pairs"), db = test::temp_dir("db") + "/pairs";
  write_images(base + "/photo", ".png", 3, 50, true);
  write_images(base + "/depth", ".png", 3, 60);
  write_images(base + "/mask", ".png", 3, 200);
  auto r = convert("--from parallel --input " + base + "/photo --input " + base + "/depth --target " + base +
                   "/mask --output " + db + " --resize 8x8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lmdb = dataset("lmdb", {{"path", db}, {"hflip", 1.0}});
  Example e = lmdb->get(2);
  EXPECT_EQ(e.input.sizes(), (at::IntArrayRef{4, 8, 8}));   // RGB photo + gray depth
  EXPECT_EQ(e.target.sizes(), (at::IntArrayRef{1, 8, 8}));  // the mask, flipped like the inputs
  fs::remove(base + "/mask/img1.png");
  r = convert("--from parallel --input " + base + "/photo --target " + base + "/mask --output " + db + "2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "'img1.png' is in " + base + "/photo but not in " + base + "/mask")) << r.err;
}

TEST(Convert, RefusesToOverwriteAndNeverLeavesAHalfWrittenDatabase) {
  const std::string root = test::temp_dir("images"), out = test::temp_dir("db"), db = out + "/x";
  write_images(fs::path(root) / "a", ".png", 2, 10);
  ASSERT_EQ(convert("--from folder --input " + root + " --output " + db).exit_code, 0);
  auto r = convert("--from folder --input " + root + " --output " + db);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "already exists; expected a new output folder; pass --overwrite")) << r.err;
  // A broken image in the middle: the old database stays, nothing partial remains.
  test::write_file(root + "/a/zz_broken.png", "not a png");
  r = convert("--from folder --input " + root + " --output " + db + " --overwrite");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "zz_broken.png: cannot read or decode the image")) << r.err;
  EXPECT_EQ(dataset("lmdb", {{"path", db}})->size(), 2);
  for (const auto& e : fs::directory_iterator(out)) EXPECT_EQ(e.path().filename(), "x") << e.path();
  fs::remove(root + "/a/zz_broken.png");
  write_images(fs::path(root) / "b", ".png", 1, 10);
  ASSERT_EQ(convert("--from folder --input " + root + " --output " + db + " --overwrite").exit_code, 0);
  EXPECT_EQ(dataset("lmdb", {{"path", db}})->size(), 3);
}

// What a folder holds, by name (nothing half-written may be among them).
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Convert, ATrailingSlashNamesTheSameFolder) {
  const std::string root = test::temp_dir("images"), out = test::temp_dir("db");
  write_images(fs::path(root) / "a", ".png", 2, 10);
  auto r = convert("--from folder --input " + root + "/ --output " + out + "/x/");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(dataset("lmdb", {{"path", out + "/x"}})->size(), 2);
  EXPECT_EQ(names_in(out), std::vector<std::string>{"x"});
  r = convert("--from folder --input " + root + " --output " + out + "/x/ --overwrite --to webdataset");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(names_in(out), std::vector<std::string>{"x"});
  EXPECT_EQ(names_in(out + "/x"), std::vector<std::string>{"shard-000000.tar"});
}

TEST(Convert, NeverReplacesTheCurrentFolderOrOneItDidNotWrite) {
  const std::string root = test::temp_dir("images"), work = test::temp_dir("work");
  write_images(fs::path(root) / "a", ".png", 2, 10);
  test::write_file(work + "/notes.txt", "mine");
  for (const std::string& output : std::vector<std::string>{".", "./", "..", work}) {
    for (const std::string overwrite : {"", " --overwrite"}) {
      auto r = test::run_command("cd " + work + " && " + test::trainyard_binary() +
                                 " convert --quiet --from folder --input " + root + " --output " + output + overwrite);
      EXPECT_EQ(r.exit_code, 2) << output << overwrite << ": " << r.err;
      EXPECT_EQ(test::nonempty_lines(r.err).size(), 1u) << r.err;
      EXPECT_TRUE(contains(r.err, "error: convert: --output " + output + ": is the current folder or one above it"))
          << r.err;
    }
  }
  EXPECT_EQ(names_in(work), std::vector<std::string>{"notes.txt"});
  // --overwrite replaces only what convert wrote: not the user's folder, not the input.
  auto r = convert("--from folder --input " + root + " --output " + work + "/.. --overwrite");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  auto mine = convert("--from folder --input " + root + " --output " + work + " --overwrite");
  EXPECT_EQ(mine.exit_code, 2) << mine.err;
  EXPECT_TRUE(contains(mine.err,
                       "--overwrite replaces only a folder convert wrote; expected a folder holding data.mdb "
                       "or shard-*.tar (or train/ and test/ with them), got a folder without them"))
      << mine.err;
  auto input = convert("--from folder --input " + root + "/a --output " + root + " --overwrite");
  EXPECT_EQ(input.exit_code, 2) << input.err;
  EXPECT_TRUE(contains(input.err, "holds the input " + root + "/a")) << input.err;
  EXPECT_EQ(names_in(work), std::vector<std::string>{"notes.txt"});
  EXPECT_EQ(names_in(root), std::vector<std::string>{"a"});
}

TEST(Convert, ASplitThatWouldBeEmptyIsRefusedBeforeAnythingIsWritten) {
  const std::string root = test::temp_dir("images"), out = test::temp_dir("db");
  write_images(fs::path(root) / "a", ".png", 2, 10);
  for (const std::string to : {"lmdb", "webdataset"}) {
    auto r = convert("--from folder --input " + root + " --to " + to + " --test-fraction 0.9 --output " + out + "/x");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(test::nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_TRUE(contains(r.err,
                         "error: convert: --test-fraction 0.9 of 2 samples leaves the training split empty; "
                         "expected at least one sample in each split, got 0 training and 2 test"))
        << r.err;
    r = convert("--from folder --input " + root + " --to " + to + " --test-fraction 0.1 --output " + out + "/x");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "leaves the test split empty")) << r.err;
    EXPECT_TRUE(fs::is_empty(out)) << to;
  }
}

TEST(Convert, SplitAndShuffle) {
  const std::string db = test::temp_dir("db") + "/split";
  auto r = convert("--from idx --images " + kFashion + "/t10k-images-idx3-ubyte.gz --labels " + kFashion +
                   "/t10k-labels-idx1-ubyte.gz --limit 100 --shuffle --seed 3 --test-fraction 0.2 --output " + db);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(dataset("lmdb", {{"path", db + "/train"}})->size(), 80);
  EXPECT_EQ(dataset("lmdb", {{"path", db + "/test"}})->size(), 20);
}

// Replaces record `index` of an LMDB with `value`.

TEST(LmdbDataset, DamagedRecordsAndUndecodableImagesAreNamedOrSkipped) {
  const std::string db = test::temp_dir("db") + "/fm";
  ASSERT_EQ(convert("--from idx --images " + kFashion + "/t10k-images-idx3-ubyte.gz --labels " + kFashion +
                    "/t10k-labels-idx1-ubyte.gz --limit 64 --output " + db)
                .exit_code,
            0);
  test::put_lmdb_record(db, 5, "TYRC\x01garbage");
  Record undecodable;
  undecodable.images.push_back({ImageEncoding::png, 28, 28, 1, "definitely not a png"});
  undecodable.labels.push_back(Label::class_index(1));
  test::put_lmdb_record(db, 9, encode_record(undecodable));
  auto lmdb = dataset("lmdb", {{"path", db}});
  try {
    lmdb->get(5);
    FAIL();
  } catch (const BadRecord& e) {
    EXPECT_TRUE(contains(e.what(), "record 0000000005: unknown image encoding 97")) << e.what();
  }
  try {
    lmdb->get(9);
    FAIL();
  } catch (const BadRecord& e) {
    EXPECT_TRUE(contains(e.what(), "record 0000000009 image 0 (png): not an image trainyard decodes")) << e.what();
  }
  // Through a real training run: an error naming the sample by default, counted when skipped.
  const std::string exp = test::temp_dir("exp") + "/bad.yaml";
  std::string yaml = test::synthetic_experiment("bad");
  const std::string train = "{plugin: synthetic, size: 512, num_classes: 4, shape: [1, 4, 4], seed: 1}";
  yaml.replace(yaml.find(train), train.size(), "{plugin: lmdb, path: " + db + "}");
  const std::string test_split = "{plugin: synthetic, size: 128, num_classes: 4, shape: [1, 4, 4], seed: 2}";
  yaml.replace(yaml.find(test_split), test_split.size(), "{plugin: lmdb, path: " + db + ", on_bad_record: skip}");
  test::write_file(exp, yaml);
  const std::string out = test::temp_dir("out");
  auto r = test::trainyard("run " + exp + " --output-dir " + out + " --set loop.decode_threads=2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "dataset.train (dataset 'lmdb' from libimage_datasets.so 1.4.0): sample ")) << r.err;
  EXPECT_TRUE(contains(r.err, "set on_bad_record: skip")) << r.err;
  r = test::trainyard("run " + exp + " --output-dir " + out + " --set dataset.train.on_bad_record=skip --fresh");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string summary = test::read_file(out + "/bad/summary.json");
  EXPECT_TRUE(contains(summary, "\"train_bad_records\": 2")) << summary;
  EXPECT_TRUE(contains(test::read_file(out + "/bad/metrics.jsonl"), "\"test_bad_records\": 2"));
}

TEST(LmdbDataset, MissingOrForeignDatabaseIsAClearError) {
  try {
    dataset("lmdb", {{"path", std::string("/nonexistent/db")}});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "database '/nonexistent/db' does not exist")) << e.what();
  }
  const std::string empty = test::temp_dir("empty");
  try {
    dataset("lmdb", {{"path", empty}});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "database '" + empty + "': cannot open it read-only")) << e.what();
  }
}

}  // namespace
}  // namespace trainyard::host
