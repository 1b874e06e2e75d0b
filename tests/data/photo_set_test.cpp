// The photo set's damaged and unusual files, one test each: the three that
// are no image are one error line naming the file (exit 2), or skipped and
// counted with on_bad_record: skip; the five that are images decode to what
// torchvision's ImageFolder loader (PIL, convert("RGB")) gives for them.
// The set is made by the project's own script (scripts/data/make_photo_set.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include <ATen/ATen.h>
#include <trainyard/error.h>
#include <nlohmann/json.hpp>

#include "data/loader.h"
#include "image_dataset.h"
#include "plugins/registry.h"
#include "support/support.h"

namespace fs = std::filesystem;
namespace test = trainyard::test;

namespace image_datasets {
namespace {

// What PIL gives for a file, as torchvision's ImageFolder loads it: an RGB
// uint8 tensor {H, W, 3}; undefined when PIL cannot open it.
at::Tensor pil_rgb(const std::string& file) {
  const std::string raw = test::temp_dir("pil") + "/" + fs::path(file).filename().string() + ".raw";
  auto r =
      test::run_command(::trainyard::test::python() +
                        " -c \"import sys; from PIL import Image; "
                        "im = Image.open(sys.argv[1]).convert('RGB'); open(sys.argv[2], 'wb').write(im.tobytes()); "
                        "print(im.size[1], im.size[0])\" " +
                        file + " " + raw);
  if (r.exit_code != 0) return {};
  int64_t h = 0, w = 0;
  std::istringstream(r.out) >> h >> w;
  const std::string bytes = test::read_file(raw);
  return at::from_blob(const_cast<char*>(bytes.data()), {h, w, 3}, at::kByte).clone();
}

// trainyard's decode of a file as the photo experiment's test side has it
// (color: rgb, no resize): uint8 {H, W, 3}.
at::Tensor ours_rgb(const std::string& file) {
  TransformOptions t;
  t.color = "rgb";
  const at::Tensor chw = apply_transforms(decode_image(test::read_file(file).data(), fs::file_size(file), file), t, 0);
  return chw.mul(255).round().to(at::kByte).permute({1, 2, 0}).contiguous();
}

struct Damaged {
  std::string file;
  std::string error;  ///< the reason in the error line; empty: the file is an image and decodes
};

class PhotoSetFile : public ::testing::TestWithParam<Damaged> {};

TEST_P(PhotoSetFile, IsOneErrorNamingTheFileOrDecodesAsTorchvisionDoes) {
  const Damaged& d = GetParam();
  const std::string file = test::small_photo_set() + "/damaged/" + d.file;
  ASSERT_TRUE(fs::exists(file));
  if (!d.error.empty()) {
    const std::string bytes = test::read_file(file);
    try {
      decode_image(bytes.data(), bytes.size(), file);
      ADD_FAILURE() << d.file << " decoded";
    } catch (const trainyard::BadRecord& e) {
      EXPECT_TRUE(test::contains(e.what(), file + ": " + d.error)) << e.what();
    }
    EXPECT_FALSE(pil_rgb(file).defined()) << "PIL (torchvision) opens " << d.file;
    return;
  }
  const at::Tensor ours = ours_rgb(file), theirs = pil_rgb(file);
  ASSERT_TRUE(theirs.defined()) << "PIL cannot open " << d.file;
  ASSERT_EQ(ours.sizes(), theirs.sizes()) << d.file << ": same orientation and size as torchvision";
  const double difference = (ours.to(at::kFloat) - theirs.to(at::kFloat)).abs().mean().item<double>();
  if (d.file == "sixteen_bit.png") {
    // PIL clips 16-bit values at 255 when converting to RGB (nearly white);
    // trainyard scales them to 8 bits. A knowing difference, checked as such.
    EXPECT_GT(theirs.to(at::kFloat).mean().item<double>(), 250);
    EXPECT_LT(ours.to(at::kFloat).mean().item<double>(), 200);
    return;
  }
  EXPECT_LT(difference, 2.0) << d.file << ": mean absolute difference from PIL's pixels, in levels of 255";
}

INSTANTIATE_TEST_SUITE_P(Damaged, PhotoSetFile,
                         ::testing::Values(Damaged{"truncated.jpg", "truncated JPEG"},
                                           Damaged{"empty.jpg", "empty file (0 bytes)"},
                                           Damaged{"not_an_image.jpg", "not an image trainyard decodes"},
                                           Damaged{"png_named.jpg", ""}, Damaged{"cmyk.jpg", ""},
                                           Damaged{"greyscale.jpg", ""}, Damaged{"sixteen_bit.png", ""},
                                           Damaged{"exif_rotated.jpg", ""}),
                         [](const auto& info) { return fs::path(info.param.file).stem().string(); });

// The photo experiment over a copy of the set's training folder with one
// damaged file added to a class.
std::string experiment_with(const std::string& damaged, const std::string& name, const std::string& policy) {
  const std::string dir = test::temp_dir("folder-" + name), root = dir + "/train";
  fs::copy(test::small_photo_set() + "/train", root, fs::copy_options::recursive);
  fs::copy_file(test::small_photo_set() + "/damaged/" + damaged, root + "/coffee/" + damaged);
  const std::string exp = dir + "/exp.yaml";
  test::write_file(exp, "name: " + name + "\ndataset:\n  train:\n    plugin: image_folder\n    root: " + root +
                            "\n    color: rgb\n    crop: random_resized\n    crop_size: [64, 64]\n" + policy +
                            "network: {plugin: mlp, hidden_sizes: [8]}\nloss: {plugin: cross_entropy}\n"
                            "optimizer: {plugin: sgd, lr: 0.01}\nloop: {epochs: 1, batch_per_device: 7}\n");
  return exp;
}

TEST(PhotoSet, ATruncatedJpegStopsTheRunWithOneErrorLineNamingItAndExitTwo) {
  const std::string exp = experiment_with("truncated.jpg", "truncated", "");
  auto r = test::trainyard("run " + exp + " --output-dir " + test::temp_dir("out-truncated"));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  const auto lines = test::nonempty_lines(r.err);
  int errors = 0;
  for (const auto& l : lines) errors += l.rfind("error:", 0) == 0;
  EXPECT_EQ(errors, 1) << r.err;
  EXPECT_TRUE(test::contains(r.err, "coffee/truncated.jpg: truncated JPEG")) << r.err;
  EXPECT_TRUE(test::contains(r.err, "on_bad_record: skip")) << r.err;
}

TEST(PhotoSet, WithOnBadRecordSkipTheDamagedFileIsSkippedAndCounted) {
  const std::string exp = experiment_with("not_an_image.jpg", "skipped", "    on_bad_record: skip\n");
  const std::string out = test::temp_dir("out-skipped");
  auto r = test::trainyard("run " + exp + " --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  double bad = -1;
  for (const auto& line : test::read_lines(out + "/skipped/metrics.jsonl")) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("values") && j["values"].contains("train_bad_records"))
      bad = j["values"]["train_bad_records"].get<double>();
  }
  EXPECT_EQ(bad, 1.0);
}

TEST(PhotoSet, ConvertKeepStoresEachJpegsOwnBytesAndTheLmdbTrainsLikeTheFolder) {
  const std::string dir = test::temp_dir("keep"), db = dir + "/train";
  auto r = test::trainyard("convert --from folder --input " + test::small_photo_set() + "/train --output " + db +
                           " --encoding keep --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  uintmax_t jpeg_bytes = 0;
  for (const auto& f : fs::recursive_directory_iterator(test::small_photo_set() + "/train"))
    if (f.is_regular_file()) jpeg_bytes += f.file_size();
  // Not re-encoded: the database holds the files' bytes plus a little framing.
  const uintmax_t db_bytes = fs::file_size(db + "/data.mdb");
  EXPECT_GT(db_bytes, jpeg_bytes);
  EXPECT_LT(db_bytes, jpeg_bytes + jpeg_bytes / 4 + 256 * 1024);
  const std::string exp = dir + "/exp.yaml";
  test::write_file(exp, "name: keep\ndataset:\n  train: {plugin: lmdb, path: " + db +
                            ", color: rgb, crop: random_resized, crop_size: [64, 64], hflip: 0.5}\n"
                            "network: {plugin: mlp, hidden_sizes: [8]}\nloss: {plugin: cross_entropy}\n"
                            "optimizer: {plugin: sgd, lr: 0.01}\nloop: {epochs: 1, batch_per_device: 4}\n");
  r = test::trainyard("iterate " + exp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "iterate: 20 samples")) << r.out;

  const std::string mixed = test::temp_dir("keep-mixed");
  fs::create_directories(mixed + "/in/cls");
  fs::copy_file(test::small_photo_set() + "/damaged/not_an_image.jpg", mixed + "/in/cls/x.jpg");
  r = test::trainyard("convert --from folder --input " + mixed + "/in --output " + mixed +
                      "/db --encoding keep --quiet");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(test::contains(r.err, "x.jpg")) << r.err;
}

// The photo experiment's training split made both ways: 8-bit samples the
// host normalizes per batch (output: uint8, the default) and floats the
// decode threads normalize (output: float) are the same batches.
TEST(PhotoSet, EightBitSamplesNormalizedByTheHostEqualTheFloatSamples) {
  const trainyard::host::Component& c = test::builtin_registry().get(trainyard::host::Kind::dataset, "image_folder");
  auto make = [&](const std::string& output) {
    std::map<std::string, trainyard::Value> o{{"root", test::small_photo_set() + "/train"},
                                              {"color", std::string("rgb")},
                                              {"crop", std::string("random_resized")},
                                              {"crop_size", std::vector<int64_t>{64, 64}},
                                              {"hflip", 0.5},
                                              {"mean", std::vector<double>{0.485, 0.456, 0.406}},
                                              {"std", std::vector<double>{0.229, 0.224, 0.225}},
                                              {"output", output}};
    for (const auto& spec : c.schema.specs())
      if (!o.count(spec.key) && spec.default_value) o[spec.key] = *spec.default_value;
    return std::get<trainyard::Factory<trainyard::Dataset>>(c.factory)(trainyard::Options(o), trainyard::Context{});
  };
  const auto pixels = make("uint8"), floats = make("float");
  EXPECT_EQ(pixels->get_seeded(0, 7).input.scalar_type(), at::kByte);
  EXPECT_EQ(floats->get_seeded(0, 7).input.scalar_type(), at::kFloat);
  ASSERT_TRUE(pixels->input_normalization().has_value());
  EXPECT_FALSE(floats->input_normalization().has_value());
  std::vector<int64_t> order(static_cast<size_t>(pixels->size()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  trainyard::host::LoaderOptions o;
  o.batch_size = 8;
  o.threads = 2;
  o.seed = 5;
  auto theirs = trainyard::host::batch_stream(*floats, order, 1, 0, o);
  o.normalization = pixels->input_normalization();
  auto ours = trainyard::host::batch_stream(*pixels, order, 1, 0, o);
  int64_t rows = 0;
  while (auto a = ours()) {
    auto b = theirs();
    ASSERT_TRUE(b.has_value());
    ASSERT_EQ(a->input.scalar_type(), at::kFloat);
    EXPECT_LT((a->input - b->input).abs().max().item<double>(), 1e-5);
    rows += a->size();
  }
  EXPECT_FALSE(theirs().has_value());
  EXPECT_EQ(rows, pixels->size());
}

}  // namespace
}  // namespace image_datasets
