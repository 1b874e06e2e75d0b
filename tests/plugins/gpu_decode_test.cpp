// decode: gpu on the CPU side: the GPU path as specified (the reference
// decoder: libjpeg's whole-size decode, then resample.h, the kernel's
// arithmetic) against the CPU path on real photographs, its batching,
// fallback, bad records, resume and sharding through the host's loader, and
// the option's errors. nvJPEG and the kernel themselves run only in
// tests/gpu (Gpu.*).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <tuple>

#include "data/loader.h"
#include "data/samplers.h"
#include "gpu_decode.h"
#include "image_dataset.h"
#include "jpeg_decode.h"
#include "plugins/registry.h"
#include "resample.h"
#include "support/support.h"
#include "trainyard/error.h"
#include "trainyard/fields.h"

namespace image_datasets {
namespace {

namespace fs = std::filesystem;
using trainyard::test::small_photo_set;

// A dataset of the plugin through its own factory, as a run builds it.
std::shared_ptr<ImageDataset> dataset(const std::string& name, std::map<std::string, trainyard::Value> o,
                                      const trainyard::Context& context = {}) {
  const auto& c = trainyard::test::builtin_registry().get(trainyard::host::Kind::dataset, name);
  for (const auto& spec : c.schema.specs())
    if (!o.count(spec.key) && spec.default_value) o[spec.key] = *spec.default_value;
  auto made = std::get<trainyard::Factory<trainyard::Dataset>>(c.factory)(trainyard::Options(o), context);
  auto images = std::dynamic_pointer_cast<ImageDataset>(made);
  if (!images) throw std::runtime_error(name + " is not an ImageDataset");
  return images;
}

// The same dataset twice: one through the CPU path, one through the GPU path as specified.
std::pair<std::shared_ptr<ImageDataset>, std::shared_ptr<ImageDataset>> cpu_and_gpu(
    const std::string& name, const std::map<std::string, trainyard::Value>& o) {
  auto gpu = dataset(name, o);
  gpu->use_decoder(make_reference_decoder());
  return {dataset(name, o), gpu};
}

std::shared_ptr<ImageDataset> folder(const std::string& root, std::map<std::string, trainyard::Value> o,
                                     const trainyard::Context& context = {}) {
  o["root"] = root;
  return dataset("image_folder", std::move(o), context);
}

// ImageNet's training transforms (at 96 pixels, to keep the test short) and its evaluation ones.
std::map<std::string, trainyard::Value> training() {
  return {{"color", std::string("rgb")},
          {"crop", std::string("random_resized")},
          {"crop_size", std::vector<int64_t>{96, 96}},
          {"hflip", 0.5}};
}
std::map<std::string, trainyard::Value> evaluation() {
  return {{"color", std::string("rgb")},
          {"resize_short", int64_t(110)},
          {"crop", std::string("center")},
          {"crop_size", std::vector<int64_t>{96, 96}}};
}

// A one-class folder: the photo set's first `photos` training JPEGs (0.jpg,
// 1.jpg, ...) and the named files of its damaged/ folder.
std::string mixed_folder(const std::string& name, int photos, const std::vector<std::string>& damaged) {
  const std::string root = trainyard::test::temp_dir(name) + "/root";
  fs::remove_all(root);
  fs::create_directories(root + "/a");
  int copied = 0;
  for (const auto& entry : fs::recursive_directory_iterator(small_photo_set() + "/train"))
    if (entry.is_regular_file() && copied < photos)
      fs::copy_file(entry.path(), root + "/a/" + std::to_string(copied++) + ".jpg");
  for (const std::string& file : damaged) fs::copy_file(small_photo_set() + "/damaged/" + file, root + "/a/" + file);
  return root;
}

std::vector<int64_t> all_indices(const trainyard::Dataset& d) {
  std::vector<int64_t> ids(static_cast<size_t>(d.size()));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  return ids;
}

// The per-pixel difference between the two paths, in 8-bit levels.
struct Difference {
  double mean = 0, share_above_24 = 0;
  int64_t max = 0;
};
Difference difference(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor d = (a.to(at::kInt) - b.to(at::kInt)).abs().to(at::kDouble);
  return {d.mean().item<double>(), (d > 24).to(at::kDouble).mean().item<double>(), d.max().item<int64_t>()};
}

// The stated tolerance against the CPU path as it runs (docs/data.md): the
// GPU path decodes the whole photograph and averages it straight to the
// crop's size; the CPU path decodes a photograph it shrinks at 1/2-1/8 by
// libjpeg's scaled IDCT, crops on that grid, then resizes. Over a batch: mean
// |difference| <= 5 levels, at most 5% of the values more than 24 levels
// apart (edges shifted by less than a pixel of the reduced grid).
void expect_within_tolerance(const at::Tensor& gpu_path, const at::Tensor& cpu_path, const std::string& what) {
  const Difference d = difference(gpu_path, cpu_path);
  EXPECT_LE(d.mean, 5.0) << what << ": max " << d.max << ", share > 24: " << d.share_above_24;
  EXPECT_LE(d.share_above_24, 0.05) << what << ": mean " << d.mean << ", max " << d.max;
}

at::Tensor cpu_batch(const trainyard::Dataset& d, const std::vector<int64_t>& ids, const std::vector<uint64_t>& seeds) {
  std::vector<at::Tensor> rows;
  for (size_t k = 0; k < ids.size(); ++k) rows.push_back(d.get_seeded(ids[k], seeds[k]).input);
  return at::stack(rows);
}

// The CPU path's transforms on libjpeg's whole-size decode of every file of
// `root` (image_folder's order: by name), without its reduced decode.
at::Tensor whole_decode_batch(const std::string& root, const TransformOptions& t, const std::vector<uint64_t>& seeds) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<at::Tensor> rows;
  for (size_t k = 0; k < files.size(); ++k) {
    const std::string bytes = read_file_bytes(files[k]);
    rows.push_back(apply_transforms(*decode_jpeg(bytes.data(), bytes.size(), 1, files[k]), t, seeds[k]));
  }
  return at::stack(rows);
}

TransformOptions as_transforms(const std::map<std::string, trainyard::Value>& o) {
  TransformOptions t;
  t.color = "rgb";
  t.output = "uint8";
  t.crop_size = {96, 96};
  t.crop = std::get<std::string>(o.at("crop"));
  if (o.count("hflip")) t.hflip = std::get<double>(o.at("hflip"));
  if (o.count("resize_short")) t.resize_short = std::get<int64_t>(o.at("resize_short"));
  return t;
}

// The GPU path as specified takes the CPU path's crop and flip for every
// seed and resamples as OpenCV does: on the same whole-size decode, the mean
// |difference| to the CPU path's transforms under 0.05 levels and none above
// 8 (OpenCV's fixed-point weights round differently by 1; a crop that
// enlarges one axis and shrinks the other, which OpenCV's INTER_AREA
// interpolates its own way, differs by a few levels in a few pixels).
TEST(GpuDecode, ThePathAsSpecifiedIsTheCpuPathsTransformsOnAWholeSizeDecode) {
  const std::string root = small_photo_set() + "/train";
  for (const auto& [name, options] : {std::pair{"training", training()}, std::pair{"evaluation", evaluation()}}) {
    auto gpu = folder(root, options);
    gpu->use_decoder(make_reference_decoder());
    const std::vector<int64_t> ids = all_indices(*gpu);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<uint64_t> seeds;
      for (int64_t i : ids) seeds.push_back(trainyard::host::sample_seed(11, epoch, i));
      const at::Tensor ours = gpu->get_batch(ids, seeds).input;
      const Difference d = difference(ours, whole_decode_batch(root, as_transforms(options), seeds));
      EXPECT_LE(d.mean, 0.05) << name << " epoch " << epoch << ": max " << d.max;
      EXPECT_LE(d.max, 8) << name << " epoch " << epoch << ": mean " << d.mean;
    }
  }
}

// Against the CPU path as it runs: within the stated tolerance, which is
// what the CPU path's own reduced decode changes (the test above: the rest is
// the same arithmetic).
TEST(GpuDecode, ThePathAsSpecifiedGivesTheCpuPathsPixelsWithinTheStatedTolerance) {
  for (const auto& [name, options] : {std::pair{"training", training()}, std::pair{"evaluation", evaluation()}}) {
    auto cpu = folder(small_photo_set() + "/train", options);
    auto gpu = folder(small_photo_set() + "/train", options);
    gpu->use_decoder(make_reference_decoder());
    const std::vector<int64_t> ids = all_indices(*cpu);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<uint64_t> seeds;
      for (int64_t i : ids) seeds.push_back(trainyard::host::sample_seed(11, epoch, i));
      const trainyard::Batch batch = gpu->get_batch(ids, seeds);
      const at::Tensor expected = cpu_batch(*cpu, ids, seeds);
      ASSERT_EQ(batch.input.sizes(), expected.sizes()) << name;
      EXPECT_EQ(batch.input.scalar_type(), at::kByte);
      expect_within_tolerance(batch.input, expected, std::string(name) + " epoch " + std::to_string(epoch));
    }
    EXPECT_EQ(gpu->decode_counts().cpu, 0) << "every photo of the set is a colour JPEG the GPU path takes";
    EXPECT_EQ(gpu->decode_counts().gpu, 3 * static_cast<int64_t>(ids.size()));
  }
}

// The tolerance tells crops and flips apart: the same photo with the other
// flip, or another seed's crop, is far outside it, so passing above means
// the GPU path took the CPU path's region and flip for every seed.
TEST(GpuDecode, TheToleranceTellsAnotherCropOrFlipApart) {
  auto options = training();
  options["hflip"] = 0.0;
  auto cpu = folder(small_photo_set() + "/train", options);
  options["hflip"] = 1.0;
  auto flipped = folder(small_photo_set() + "/train", options);
  flipped->use_decoder(make_reference_decoder());
  const std::vector<int64_t> ids = all_indices(*cpu);
  std::vector<uint64_t> seeds, other_seeds;
  for (int64_t i : ids) seeds.push_back(uint64_t(i) * 7 + 1), other_seeds.push_back(uint64_t(i) * 7 + 2);
  const at::Tensor expected = cpu_batch(*cpu, ids, seeds);
  // hflip 1.0 flips every sample and draws the same crop (the flip is drawn after it).
  const at::Tensor mirrored = flipped->get_batch(ids, seeds).input;
  EXPECT_GT(difference(mirrored, expected).mean, 5.0 * 3);
  expect_within_tolerance(mirrored.flip({3}), expected, "the flipped batch flipped back");
  EXPECT_GT(difference(cpu_batch(*cpu, ids, other_seeds), expected).mean, 5.0 * 3);
}

// resample.h on known pixels: an exact 2x average, a copy, a mirror.
TEST(GpuDecode, TheResampleArithmeticAveragesCopiesAndMirrors) {
  const int w = 4, h = 2;
  std::vector<uint8_t> source(3 * w * h);
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < w * h; ++i) source[c * w * h + i] = uint8_t(10 * i + c);
  std::vector<uint8_t> out(3 * 2 * 1);
  ResampleJob half{source.data(), out.data(), w, h, 0, 0, 0, 0, float(w), float(h)};
  for (int x = 0; x < 2; ++x) resample_pixel(half, 2, 1, x, 0);
  // Output (0, 0) averages source columns 0-1 of rows 0-1: (0 + 10 + 40 + 50) / 4 = 25.
  EXPECT_EQ(out[0], 25);
  EXPECT_EQ(out[1], 45);
  EXPECT_EQ(out[2], 26);  // channel 1 is one level up
  std::vector<uint8_t> copy(3 * w * h);
  ResampleJob same{source.data(), copy.data(), w, h, 1, 0, 0, 0, float(w), float(h)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) resample_pixel(same, w, h, x, y);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) EXPECT_EQ(copy[y * w + x], source[y * w + (w - 1 - x)]) << x << "," << y;
}

std::vector<trainyard::Batch> read_all(trainyard::BatchStream stream) {
  std::vector<trainyard::Batch> out;
  while (auto b = stream()) out.push_back(std::move(*b));
  return out;
}

// Every source of JPEG bytes goes through the GPU path: an LMDB of the
// files' own bytes, local WebDataset shards, and the same shards streamed
// through pipe:cat (its own get_batch, read in order through the loader),
// each within the stated tolerance of the CPU path, labels equal.
TEST(GpuDecode, LmdbRecordsLocalShardsAndStreamedShardsDecodeThroughIt) {
  const std::string dir = trainyard::test::temp_dir("gpu-decode-sources");
  for (const char* to : {"lmdb --output ", "webdataset --shard-size 6 --output "}) {
    const std::string out = dir + (std::string(to).rfind("lmdb", 0) == 0 ? "/db" : "/shards");
    fs::remove_all(out);
    const auto r = trainyard::test::trainyard("convert --from folder --input " + small_photo_set() +
                                              "/train --encoding keep --quiet --to " + to + out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const std::string shards = dir + "/shards/shard-{000000..000003}.tar";
  for (const auto& [name, kind, source] :
       {std::tuple{"lmdb", "lmdb", std::map<std::string, trainyard::Value>{{"path", dir + "/db"}}},
        std::tuple{"local shards", "webdataset", std::map<std::string, trainyard::Value>{{"urls", shards}}}}) {
    auto options = training();
    options.insert(source.begin(), source.end());
    const auto [cpu, gpu] = cpu_and_gpu(kind, options);
    const std::vector<int64_t> ids = all_indices(*cpu);
    ASSERT_EQ(ids.size(), 20u) << name;
    std::vector<uint64_t> seeds;
    for (int64_t i : ids) seeds.push_back(uint64_t(i) * 3 + 1);
    const trainyard::Batch batch = gpu->get_batch(ids, seeds);
    expect_within_tolerance(batch.input, cpu_batch(*cpu, ids, seeds), name);
    EXPECT_EQ(gpu->decode_counts().gpu, 20) << name;
  }
  auto options = training();
  options.insert({{"urls", "pipe:cat " + shards}, {"size", int64_t{20}}, {"num_classes", int64_t{10}}});
  auto cpu = dataset("webdataset", options);
  auto gpu = dataset("webdataset", options);
  gpu->use_decoder(make_reference_decoder());
  ASSERT_TRUE(gpu->streamed());
  trainyard::host::LoaderOptions o;
  o.batch_size = 6;
  o.threads = 2;
  o.seed = 4;
  o.streamed = true;
  const std::vector<int64_t> positions = all_indices(*gpu);
  const auto ours = read_all(trainyard::host::batch_stream(*gpu, positions, 1, 0, o));
  const auto theirs = read_all(trainyard::host::batch_stream(*cpu, positions, 1, 0, o));
  ASSERT_EQ(ours.size(), theirs.size());
  for (size_t b = 0; b < ours.size(); ++b) {
    EXPECT_TRUE(ours[b].target.equal(theirs[b].target)) << "batch " << b;
    expect_within_tolerance(ours[b].input, theirs[b].input, "streamed batch " + std::to_string(b));
  }
  EXPECT_EQ(gpu->decode_counts().gpu, 20);
}

// target: boxes through the GPU path's batches (coco, and an LMDB and shards
// convert made of its scene set): each sample read once, the batch gets the
// CPU path's fields and targets, and inputs within the stated tolerance.
TEST(GpuDecode, BoxDatasetsGiveTheirBatchesTheCpuPathsFields) {
  const std::string dir = trainyard::test::temp_dir("gpu-decode-boxes");
  fs::remove_all(dir);
  ASSERT_EQ(std::system((trainyard::test::python() + " " + trainyard::test::source_dir() +
                         "/scripts/data/make_scene_set.py " + dir + "/set --train 12 --test 1 --size 64 > /dev/null")
                            .c_str()),
            0);
  const std::string json = dir + "/set/train/instances.json";
  for (const std::string to : {"lmdb", "webdataset"}) {
    const auto r = trainyard::test::trainyard("convert --from coco --coco-target boxes --input " + json +
                                              " --encoding keep --quiet --to " + to + " --output " + dir + "/" + to);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  using Options = std::map<std::string, trainyard::Value>;
  for (const auto& [kind, source] :
       {std::pair{"coco", Options{{"annotations", json}}}, std::pair{"lmdb", Options{{"path", dir + "/lmdb"}}},
        std::pair{"webdataset",
                  Options{{"urls", dir + "/webdataset/shard-000000.tar"}, {"num_classes", int64_t{10}}}}}) {
    Options options{{"target", std::string("boxes")},
                    {"crop", std::string("random")},
                    {"crop_size", std::vector<int64_t>{48, 40}},
                    {"hflip", 0.5},
                    {"min_box_visible", 0.3}};
    options.insert(source.begin(), source.end());
    const auto [cpu, gpu] = cpu_and_gpu(kind, options);
    const std::vector<int64_t> ids = all_indices(*cpu);
    ASSERT_EQ(ids.size(), 12u) << kind;
    std::vector<uint64_t> seeds;
    for (int64_t i : ids) seeds.push_back(uint64_t(i) * 5 + 3);
    const trainyard::FieldBatch want =
        dynamic_cast<const trainyard::FieldDataset&>(*cpu).get_batch_with_fields(ids, seeds);
    const trainyard::FieldBatch got =
        dynamic_cast<const trainyard::FieldDataset&>(*gpu).get_batch_with_fields(ids, seeds);
    EXPECT_EQ(gpu->decode_counts().gpu, 12) << kind;
    EXPECT_EQ(cpu->decode_counts().gpu, 0) << kind;
    EXPECT_TRUE(at::equal(got.batch.target, want.batch.target)) << kind;
    EXPECT_EQ(got.batch.indices, want.batch.indices) << kind;
    expect_within_tolerance(got.batch.input, want.batch.input, kind);
    ASSERT_EQ(got.fields.size(), want.fields.size()) << kind;
    EXPECT_GT(want.fields.at(trainyard::field_name::boxes).values.size(0), 12) << kind;
    for (const auto& [name, field] : want.fields) {
      EXPECT_TRUE(at::equal(got.fields.at(name).values, field.values)) << kind << ": " << name;
      if (field.counts.defined()) {
        EXPECT_TRUE(at::equal(got.fields.at(name).counts, field.counts)) << kind << ": " << name;
      }
    }
  }
}

// Files the GPU path does not take (a PNG named .jpg, a CMYK JPEG) fill
// their rows through the CPU path: the same pixels as the CPU path's, counted,
// and said in the log; a greyscale JPEG with color: rgb is the GPU path's.
TEST(GpuDecode, FilesItDoesNotTakeGoThroughTheCpuPathCountedAndLogged) {
  const std::string root = mixed_folder("gpu-decode-fallback", 5, {"png_named.jpg", "cmyk.jpg", "greyscale.jpg"});
  auto options = training();
  auto cpu = folder(root, options);
  auto gpu = folder(root, options);
  std::vector<std::string> lines;
  gpu->use_decoder(make_reference_decoder(), [&](const std::string& line) { lines.push_back(line); });
  const std::vector<int64_t> ids = all_indices(*cpu);
  std::vector<uint64_t> seeds;
  for (int64_t i : ids) seeds.push_back(uint64_t(i) + 100);
  const trainyard::Batch batch = gpu->get_batch(ids, seeds);
  const at::Tensor expected = cpu_batch(*cpu, ids, seeds);
  expect_within_tolerance(batch.input, expected, "the mixed folder");
  EXPECT_EQ(gpu->decode_counts().cpu, 2);
  EXPECT_EQ(gpu->decode_counts().gpu, static_cast<int64_t>(ids.size()) - 2);
  // image_folder lists files by name: cmyk.jpg and png_named.jpg are rows of their own.
  int64_t exact_rows = 0;
  for (size_t k = 0; k < ids.size(); ++k) exact_rows += batch.input[int64_t(k)].equal(expected[int64_t(k)]);
  EXPECT_GE(exact_rows, 2) << "the CPU path's rows are the CPU path's pixels exactly";
  ASSERT_EQ(lines.size(), 1u) << "the first fallback is said; the next at the tenth";
  EXPECT_TRUE(trainyard::test::contains(lines[0], "1 sample decoded on the CPU instead")) << lines[0];
  EXPECT_TRUE(trainyard::test::contains(lines[0], "cmyk.jpg: a CMYK JPEG") ||
              trainyard::test::contains(lines[0], "png_named.jpg: not a JPEG"))
      << lines[0];
}

// A damaged JPEG is a bad record on the GPU path as on the CPU path: the
// batch throws, the loader retries it sample by sample (the CPU path),
// skips and counts the record or stops naming it.
TEST(GpuDecode, ADamagedJpegIsABadRecordSkippedOrNamedByTheLoader) {
  const std::string root = mixed_folder("gpu-decode-damaged", 7, {"truncated.jpg"});
  auto gpu = folder(root, training());
  gpu->use_decoder(make_reference_decoder());
  const std::vector<int64_t> ids = all_indices(*gpu);
  EXPECT_THROW(gpu->get_batch(ids, std::vector<uint64_t>(ids.size(), 1)), trainyard::BadRecord);

  trainyard::host::LoaderOptions o;
  o.batch_size = 4;
  o.threads = 2;
  o.skip_bad_records = true;
  auto stats = std::make_shared<trainyard::host::LoaderStats>();
  auto stream = trainyard::host::batch_stream(*gpu, ids, 0, 0, o, stats);
  int64_t rows = 0;
  while (auto b = stream()) rows += b->size();
  EXPECT_EQ(rows, static_cast<int64_t>(ids.size()) - 1);
  EXPECT_EQ(stats->bad_records.load(), 1);
  EXPECT_TRUE(trainyard::test::contains(stats->first_bad(), "truncated.jpg")) << stats->first_bad();

  o.skip_bad_records = false;
  auto stopping = trainyard::host::batch_stream(*gpu, ids, 0, 0, o);
  try {
    while (stopping()) {}
    FAIL() << "the damaged record did not stop the pass";
  } catch (const trainyard::ConfigError& e) {
    EXPECT_TRUE(trainyard::test::contains(e.what(), "truncated.jpg: truncated JPEG")) << e.what();
  }
}

// Resume and sharding are the loader's, unchanged: a pass resumed at batch
// 2 gives the uninterrupted pass's batches from there, bit for bit, and two
// ranks' shards partition the epoch with the batches the GPU path makes for
// exactly their indices.
TEST(GpuDecode, AResumedPassAndEachRanksShardAreTheUninterruptedOnes) {
  auto gpu = folder(small_photo_set() + "/train", training());
  gpu->use_decoder(make_reference_decoder());
  trainyard::host::LoaderOptions o;
  o.batch_size = 4;
  o.threads = 2;
  o.seed = 3;
  const trainyard::host::ShuffledSampler::Options sampling{gpu->size(), 0, o.batch_size, true, false};
  trainyard::host::ShuffledSampler whole(sampling);
  whole.reset(/*epoch=*/1, o.seed);
  const std::vector<int64_t> order = whole.order();
  const auto uninterrupted = read_all(trainyard::host::batch_stream(*gpu, order, 1, 0, o));
  const auto resumed = read_all(trainyard::host::batch_stream(*gpu, order, 1, 2, o));
  ASSERT_EQ(resumed.size() + 2, uninterrupted.size());
  for (size_t b = 0; b < resumed.size(); ++b) {
    EXPECT_EQ(resumed[b].indices, uninterrupted[b + 2].indices);
    EXPECT_TRUE(resumed[b].input.equal(uninterrupted[b + 2].input)) << "batch " << b + 2;
    EXPECT_TRUE(resumed[b].target.equal(uninterrupted[b + 2].target));
  }
  std::multiset<int64_t> seen;
  for (int rank = 0; rank < 2; ++rank) {
    trainyard::host::ShuffledSampler shard(sampling);
    shard.shard(rank, 2);
    shard.reset(1, o.seed);
    for (const auto& batch : read_all(trainyard::host::batch_stream(*gpu, shard, o))) {
      seen.insert(batch.indices.begin(), batch.indices.end());
      std::vector<uint64_t> seeds;
      for (int64_t i : batch.indices) seeds.push_back(trainyard::host::sample_seed(o.seed, 1, i));
      EXPECT_TRUE(batch.input.equal(gpu->get_batch(batch.indices, seeds).input));
    }
  }
  EXPECT_EQ(seen, std::multiset<int64_t>(order.begin(), order.end()));
}

// The option: transforms the GPU path does not apply are refused when the
// file is read; decode: gpu or auto on a CPU run decodes on the CPU and
// says so; nvJPEG that cannot be loaded is named with the way to install it.
TEST(GpuDecode, TheOptionRefusesWhatTheGpuPathCannotApplyAndSaysWhereItDecodes) {
  auto options = training();
  options["decode"] = std::string("gpu");
  options["rotate_degrees"] = 10.0;
  options["output"] = std::string("float");
  try {
    folder(small_photo_set() + "/train", options);
    FAIL() << "decode: gpu with rotate_degrees was accepted";
  } catch (const trainyard::ConfigError& e) {
    EXPECT_TRUE(trainyard::test::contains(e.what(), "decode: gpu with rotate_degrees, output: float")) << e.what();
    EXPECT_TRUE(trainyard::test::contains(e.what(), "use decode: cpu")) << e.what();
  }
  options.erase("rotate_degrees"), options.erase("output");
  for (const std::string decode : {"gpu", "auto"}) {
    options["decode"] = decode;
    testing::internal::CaptureStderr();
    trainyard::Context context;
    context.component = "dataset";
    auto d = folder(small_photo_set() + "/train", options, context);
    const std::string said = testing::internal::GetCapturedStderr();
    EXPECT_TRUE(trainyard::test::contains(
        said, "dataset: decode: " + decode + ": decoding on the CPU: the run is on cpu, not a GPU"))
        << said;
    EXPECT_EQ(d->get_batch({0, 1}, {1, 2}).input.device().type(), c10::DeviceType::CPU);
    EXPECT_EQ(d->decode_counts().gpu, 0);
  }
  // Greyscale photographs kept 1-channel: nothing the GPU path makes.
  auto grey = folder(mixed_folder("gpu-decode-grey", 0, {"greyscale.jpg"}),
                     {{"crop", std::string("center")}, {"crop_size", std::vector<int64_t>{32, 32}}});
  EXPECT_THROW(grey->use_decoder(make_reference_decoder()), trainyard::Error);
#ifdef TRAINYARD_WITH_NVJPEG
  EXPECT_EQ(nvjpeg_unavailable(), std::nullopt) << "install-deps.sh installs nvJPEG beside torch";
  const std::string missing = nvjpeg_load_error("/nonexistent/libnvjpeg.so.13");
  EXPECT_TRUE(trainyard::test::contains(missing, "cannot load /nonexistent/libnvjpeg.so.13")) << missing;
  EXPECT_TRUE(trainyard::test::contains(missing, "PyPI's nvidia-nvjpeg")) << missing;
#else
  EXPECT_NE(nvjpeg_unavailable(), std::nullopt);
#endif
}

// The user's side on a machine without a GPU: a run with decode: gpu trains
// on the CPU and says so in one line; decode: gpu with a transform the GPU
// path does not apply, or an unknown value, is one error line naming the
// file, line and key, exit 2, and no run directory.
TEST(GpuDecode, ARunSaysWhereItDecodesAndRefusesWhatTheGpuPathCannotDo) {
  const std::string dir = trainyard::test::temp_dir("gpu-decode-cli"), exp = dir + "/dg.yaml";
  const auto experiment = [&](const std::string& decode) {
    trainyard::test::write_file(
        exp, "name: dg\ndataset:\n  train: {plugin: image_folder, root: " + small_photo_set() +
                 "/train, color: rgb, crop: random_resized, crop_size: [32, 32], hflip: 0.5, " + decode +
                 "}\nnetwork: {plugin: mlp, hidden_sizes: [8]}\nloss: {plugin: cross_entropy}\n"
                 "optimizer: {plugin: sgd, lr: 0.01}\nloop: {epochs: 1, batch_per_device: 4, decode_threads: 2}\n");
  };
  experiment("decode: gpu");
  auto r = trainyard::test::trainyard("run " + exp + " --output-dir " + dir + "/runs");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(trainyard::test::contains(r.err, "dataset.train: decode: gpu: decoding on the CPU: the run is on cpu"))
      << r.err;
  experiment("decode: gpu, brightness: 0.2");
  r = trainyard::test::trainyard("run " + exp + " --output-dir " + dir + "/refused");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const auto lines = trainyard::test::nonempty_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_TRUE(trainyard::test::contains(lines[0], "error: " + exp + ":3:")) << lines[0];
  EXPECT_TRUE(trainyard::test::contains(lines[0], "decode: gpu with brightness; expected the transforms")) << lines[0];
  EXPECT_FALSE(fs::exists(dir + "/refused"));
  experiment("decode: nvjpeg");
  r = trainyard::test::trainyard("run " + exp + " --output-dir " + dir + "/refused");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(trainyard::test::contains(r.err,
                                        "dataset.train.decode: 'nvjpeg' is not a valid choice; expected one "
                                        "of cpu, gpu, auto"))
      << r.err;
}

// --- On a GPU (scripts/test-gpu.sh runs Gpu.*; ctest never does) ----------------

// Skips without a GPU, or fails where scripts/test-gpu.sh says there is one.
bool gpu_missing() {
  if (torch::cuda::is_available()) return false;
  const char* expected = std::getenv("TRAINYARD_EXPECT_GPUS");
  if (expected && std::atoi(expected) > 0) ADD_FAILURE() << "nvidia-smi lists GPUs but LibTorch sees none";
  return true;
}

trainyard::Context on_gpu() {
  trainyard::Context context;
  context.device = c10::Device(c10::DeviceType::CUDA, 0);
  context.component = "dataset";
  return context;
}

// nvJPEG and the kernel against the path as specified (libjpeg's whole-size
// decode and resample.h on the CPU): nvJPEG's IDCT and chroma upsampling
// differ from libjpeg's by a level or two, so mean |difference| <= 1.5 levels
// and at most 1% of the values more than 24 apart; against the CPU path as it
// runs, the stated tolerance. The files nvJPEG's path does not take go
// through the CPU path, counted.
TEST(Gpu, NvJpegBatchesAreThePathAsSpecifiedAndTheCpuPathWithinTheirTolerances) {
  if (gpu_missing()) GTEST_SKIP() << "needs a GPU";
  const std::string root = small_photo_set() + "/train";
  for (const auto& [name, options] : {std::pair{"training", training()}, std::pair{"evaluation", evaluation()}}) {
    auto gpu_options = options;
    gpu_options["decode"] = std::string("gpu");
    auto gpu = folder(root, gpu_options, on_gpu());
    auto reference = folder(root, options);
    reference->use_decoder(make_reference_decoder());
    auto cpu = folder(root, options);
    const std::vector<int64_t> ids = all_indices(*gpu);
    std::vector<uint64_t> seeds;
    for (int64_t i : ids) seeds.push_back(trainyard::host::sample_seed(5, 0, i));
    const trainyard::Batch batch = gpu->get_batch(ids, seeds);
    ASSERT_TRUE(batch.input.is_cuda()) << name;
    const at::Tensor ours = batch.input.cpu();
    const Difference d = difference(ours, reference->get_batch(ids, seeds).input);
    EXPECT_LE(d.mean, 1.5) << name << ": max " << d.max;
    EXPECT_LE(d.share_above_24, 0.01) << name << ": mean " << d.mean;
    expect_within_tolerance(ours, cpu_batch(*cpu, ids, seeds), name);
    EXPECT_EQ(gpu->decode_counts().gpu, static_cast<int64_t>(ids.size())) << name;
  }
  const std::string mixed = mixed_folder("gpu-nvjpeg-mixed", 5, {"png_named.jpg", "cmyk.jpg", "greyscale.jpg"});
  auto options = training();
  auto cpu = folder(mixed, options);
  options["decode"] = std::string("gpu");
  auto gpu = folder(mixed, options, on_gpu());
  const std::vector<int64_t> ids = all_indices(*gpu);
  std::vector<uint64_t> seeds(ids.size(), 9);
  expect_within_tolerance(gpu->get_batch(ids, seeds).input.cpu(), cpu_batch(*cpu, ids, seeds), "the mixed folder");
  EXPECT_EQ(gpu->decode_counts().cpu, 2) << "the PNG and the CMYK JPEG";
}

// A run that decodes on the GPU: it trains, says what decodes, and the
// summary's input wait is there to compare with decode: cpu.
TEST(Gpu, APhotoRunWithDecodeGpuTrainsAndSaysWhatDecodes) {
  if (gpu_missing()) GTEST_SKIP() << "needs a GPU";
  const std::string dir = trainyard::test::temp_dir("gpu-decode-run"), exp = dir + "/gpu.yaml";
  trainyard::test::write_file(
      exp, "name: gpu\ndataset:\n  train: {plugin: image_folder, root: " + small_photo_set() +
               "/train, color: rgb, crop: random_resized, crop_size: [64, 64], hflip: 0.5, decode: gpu, "
               "mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}\n"
               "  test: {plugin: image_folder, root: " +
               small_photo_set() +
               "/val, color: rgb, resize_short: 72, crop: center, crop_size: [64, 64], decode: gpu, "
               "mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}\n"
               "network: {plugin: resnet, depth: 18, width: 8}\nloss: {plugin: cross_entropy}\n"
               "optimizer: {plugin: sgd, lr: 0.01}\nmeters: [{plugin: loss}, {plugin: accuracy}]\n"
               "loop: {epochs: 2, batch_per_device: 4, decode_threads: 2}\ndistributed: {num_gpus: 1}\n");
  const auto r = trainyard::test::trainyard("run " + exp + " --output-dir " + dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(trainyard::test::contains(r.out + r.err, "decode: gpu: JPEGs by nvJPEG")) << r.err;
  // With a captured step: the decode threads go on while the training thread
  // captures and replays (nvJPEG's pinned buffers come from LibTorch's caching
  // host allocator: a cudaFreeHost during the capture would end it).
  const auto g = trainyard::test::trainyard("run " + exp + " --output-dir " + dir +
                                            "/graphed --set loop.cuda_graph=true --set loop.epochs=3");
  EXPECT_EQ(g.exit_code, 0) << g.err;
  EXPECT_TRUE(trainyard::test::contains(g.out + g.err, "loop.cuda_graph: the step is captured at iteration 4"))
      << g.err;
  EXPECT_FALSE(trainyard::test::contains(g.err, "could not be captured")) << g.err;
}

}  // namespace
}  // namespace image_datasets
