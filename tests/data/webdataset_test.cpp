// WebDataset tar shards: trainyard's shards read by the real `webdataset`
// package from PyPI, and shards that package wrote read by trainyard.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <ATen/ATen.h>
#include <opencv2/core.hpp>

#include <trainyard/error.h>
#include <trainyard/image_codec.h>

#include "image_dataset.h"
#include "plugins/registry.h"
#include "support/support.h"

namespace fs = std::filesystem;
namespace test = trainyard::test;

namespace image_datasets {
namespace {

std::string shard_experiment(const std::string& dir, const std::string& urls,
                             const std::string& loop = "{epochs: 1, batch_per_device: 4}",
                             const std::string& more = "") {
  const std::string exp = dir + "/exp.yaml";
  test::write_file(exp, "name: shards\ndataset:\n  train: {plugin: webdataset, urls: '" + urls +
                            "', color: rgb, crop: random_resized, crop_size: [64, 64], hflip: 0.5" + more +
                            "}\n"
                            "network: {plugin: mlp, hidden_sizes: [8]}\nloss: {plugin: cross_entropy}\n"
                            "optimizer: {plugin: sgd, lr: 0.01}\nloop: " +
                            loop + "\n");
  return exp;
}

// `exp` run whole, and stopped by SIGTERM mid-run then resumed: the same weights.
void expect_exact_resume(const std::string& exp, const std::string& dir) {
  auto whole = test::trainyard("run " + exp + " --output-dir " + dir + "/whole");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  auto stopped = test::interrupted("run " + exp + " --output-dir " + dir + "/split",
                                   dir + "/split/shards/metrics.jsonl", 300, "TERM");
  ASSERT_EQ(stopped.exit_code, 4) << stopped.out << stopped.err;
  EXPECT_TRUE(test::contains(stopped.err, "stopping: SIGTERM at iteration")) << stopped.err;
  auto resumed = test::trainyard("run " + exp + " --output-dir " + dir + "/split");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(test::contains(resumed.out, "resuming from ")) << resumed.out;
  EXPECT_EQ(test::compare_checkpoint_networks(test::latest_checkpoint(dir + "/whole/shards"),
                                              test::latest_checkpoint(dir + "/split/shards")),
            "");
}

TEST(WebDataset, BracePatternsExpandAsWebdatasetsDo) {
  EXPECT_EQ(expand_braces("a/train-{000..002}.tar"),
            (std::vector<std::string>{"a/train-000.tar", "a/train-001.tar", "a/train-002.tar"}));
  EXPECT_EQ(expand_braces("{x,y}-{8..10}.tar"),
            (std::vector<std::string>{"x-8.tar", "x-9.tar", "x-10.tar", "y-8.tar", "y-9.tar", "y-10.tar"}));
  EXPECT_EQ(expand_braces("plain.tar"), (std::vector<std::string>{"plain.tar"}));
  EXPECT_THROW(expand_braces("bad-{1..3.tar"), trainyard::ConfigError);
  EXPECT_THROW(expand_braces("bad-{5..3}.tar"), trainyard::ConfigError);
}

TEST(WebDataset, ConvertWritesShardsTheWebdatasetPackageReadsAndTrainyardTrainsFrom) {
  const std::string dir = test::temp_dir("convert-shards");
  auto r = test::trainyard("convert --from folder --input " + test::small_photo_set() + "/train --output " + dir +
                           "/shards --to webdataset --shard-size 7 --encoding keep --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, dir + "/shards/shard-{000000..000002}.tar")) << r.out;
  ASSERT_TRUE(fs::exists(dir + "/shards/shard-000002.tar"));
  EXPECT_FALSE(fs::exists(dir + "/shards/shard-000003.tar"));

  // The real reader: every sample has its JPEG (PIL opens it) and its class.
  const std::string check = dir + "/read.py";
  test::write_file(check,
                   "import io, sys, webdataset as wds\n"
                   "from PIL import Image\n"
                   "n = total = 0\n"
                   "for s in wds.WebDataset(sys.argv[1], shardshuffle=False):\n"
                   "    Image.open(io.BytesIO(s['jpg'])).load()\n"
                   "    n += 1; total += int(s['cls'])\n"
                   "print(n, total)\n");
  r = test::run_command(::trainyard::test::python() + " " + check + " '" + dir + "/shards/shard-{000000..000002}.tar'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "20 90\n") << "2 samples of each class 0..9";

  r = test::trainyard("iterate " + shard_experiment(dir, dir + "/shards/shard-{000000..000002}.tar"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "iterate: 20 samples")) << r.out;
}

TEST(WebDataset, ShardsTheWebdatasetPackageWroteTrainInTrainyard) {
  const std::string dir = test::temp_dir("package-shards");
  const std::string write = dir + "/write.py";
  test::write_file(
      write,
      "import os, sys, webdataset as wds\n"
      "root, out = sys.argv[1], sys.argv[2]\n"
      "classes = sorted(os.listdir(root))\n"
      "with wds.ShardWriter(out + '/part-%03d.tar', maxcount=8) as sink:\n"
      "    for label, c in enumerate(classes):\n"
      "        for f in sorted(os.listdir(os.path.join(root, c))):\n"
      "            data = open(os.path.join(root, c, f), 'rb').read()\n"
      "            sink.write({'__key__': c + '/' + f.split('.')[0], 'jpg': data, 'json': {'label': label}})\n");
  auto r =
      test::run_command(::trainyard::test::python() + " " + write + " " + test::small_photo_set() + "/train " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(dir + "/part-002.tar"));
  const std::string exp = shard_experiment(dir, dir + "/part-{000..002}.tar");
  r = test::trainyard("validate " + exp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "dataset webdataset (20 train")) << r.out;
  r = test::trainyard("run " + exp + " --output-dir " + dir + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(WebDataset, ATruncatedShardIsOneErrorNamingTheShard) {
  const std::string dir = test::temp_dir("truncated-shard");
  auto r = test::trainyard("convert --from folder --input " + test::small_photo_set() + "/train --output " + dir +
                           "/shards --to webdataset --shard-size 10 --encoding keep --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string shard = dir + "/shards/shard-000001.tar";
  fs::resize_file(shard, fs::file_size(shard) / 2);
  r = test::trainyard("validate " + shard_experiment(dir, dir + "/shards/shard-{000000..000001}.tar"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(test::contains(r.err, "shard " + shard + ": ")) << r.err;
  EXPECT_TRUE(test::contains(r.err, "the shard is truncated: copy it again")) << r.err;
}

TEST(WebDataset, ARunFromShardsStoppedMidEpochResumesToTheSameWeightsAsOneWithoutAStop) {
  const std::string dir = test::temp_dir("resume-shards");
  auto r = test::trainyard("convert --from folder --input " + test::small_photo_set() + "/train --output " + dir +
                           "/shards --to webdataset --shard-size 6 --encoding keep --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 100 epochs of 10 iterations: a few seconds, long enough to stop inside.
  const std::string exp = shard_experiment(dir, dir + "/shards/shard-{000000..000003}.tar",
                                           "{epochs: 100, batch_per_device: 2, shuffle: true, decode_threads: 2}");
  expect_exact_resume(exp, dir);
}

// Streamed shards (pipe:COMMAND), straight from the plugin: a dataset for
// one rank of `world`, 16x16 pixels without augmentation.
std::shared_ptr<trainyard::Dataset> shard_dataset(const std::string& urls, int rank = 0, int world = 1) {
  const auto& c = test::builtin_registry().get(trainyard::host::Kind::dataset, "webdataset");
  std::map<std::string, trainyard::Value> o{{"urls", urls},
                                            {"size", int64_t{20}},
                                            {"num_classes", int64_t{10}},
                                            {"shuffle_buffer", int64_t{5}},
                                            {"color", std::string("rgb")},
                                            {"load_size", std::vector<int64_t>{16, 16}}};
  for (const auto& spec : c.schema.specs())
    if (!o.count(spec.key) && spec.default_value) o[spec.key] = *spec.default_value;
  trainyard::Context context;
  context.rank = rank, context.world_size = world, context.seed = 3;
  return std::get<trainyard::Factory<trainyard::Dataset>>(c.factory)(trainyard::Options(o), context);
}

// A sample told apart from the others: its label and the sum of its pixels.
using Signature = std::pair<int64_t, int64_t>;
Signature signature(const trainyard::Example& e) { return {e.target.item<int64_t>(), e.input.sum().item<int64_t>()}; }

std::vector<Signature> read_pass(const trainyard::Dataset& d, int64_t epoch, int64_t first, int64_t count) {
  d.begin_pass(epoch, first);
  std::vector<Signature> out;
  for (int64_t p = first; p < first + count; ++p) out.push_back(signature(d.get_seeded(p, 0)));
  return out;
}

std::vector<Signature> sorted(std::vector<Signature> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::string five_shards() {
  static const std::string dir = [] {
    const std::string d = test::temp_dir("stream-shards");
    auto r = test::trainyard("convert --from folder --input " + test::small_photo_set() + "/train --output " + d +
                             "/shards --to webdataset --shard-size 4 --encoding keep --quiet");
    if (r.exit_code != 0) throw std::runtime_error(r.err);
    return d + "/shards";
  }();
  return dir;
}

TEST(WebDataset, PipeShardsStreamEachSampleOncePerCycleInAnOrderFromSeedAndEpochAndResumeExactly) {
  const std::string files = five_shards() + "/shard-{000000..000004}.tar";  // 5 shards of 4 samples
  auto local = shard_dataset(files);
  EXPECT_FALSE(local->streamed());
  std::vector<Signature> all;
  for (int64_t i = 0; i < local->size(); ++i) all.push_back(signature(local->get_seeded(i, 0)));
  ASSERT_EQ(all.size(), 20u);

  auto stream = shard_dataset("pipe:cat " + files);
  ASSERT_TRUE(stream->streamed());
  EXPECT_EQ(stream->size(), 20);
  const auto epoch0 = read_pass(*stream, 0, 0, 20), epoch1 = read_pass(*stream, 1, 0, 20);
  EXPECT_EQ(sorted(epoch0), sorted(all)) << "one cycle: every sample once";
  EXPECT_EQ(sorted(epoch1), sorted(all));
  EXPECT_NE(epoch0, epoch1) << "shard order and buffer draws change with the epoch";
  EXPECT_EQ(read_pass(*stream, 0, 0, 20), epoch0) << "the same (seed, epoch): the same order";
  const auto resumed = read_pass(*stream, 0, 7, 13);
  EXPECT_EQ(resumed, std::vector<Signature>(epoch0.begin() + 7, epoch0.end())) << "a pass from position 7";
  // Past the cycle: the next one, another permutation.
  const auto two_cycles = read_pass(*stream, 0, 0, 40);
  EXPECT_EQ(sorted(std::vector<Signature>(two_cycles.begin() + 20, two_cycles.end())), sorted(all));

  // Two ranks read disjoint shards: 5 shards, cycles of 3 and 2 shards alternate.
  auto rank0 = shard_dataset("pipe:cat " + files, 0, 2), rank1 = shard_dataset("pipe:cat " + files, 1, 2);
  const auto a = read_pass(*rank0, 0, 0, 8), b = read_pass(*rank1, 0, 0, 8);
  std::vector<Signature> both = a;
  both.insert(both.end(), b.begin(), b.end());
  std::sort(both.begin(), both.end());
  EXPECT_EQ(std::adjacent_find(both.begin(), both.end()), both.end()) << "no sample on both ranks";
}

TEST(WebDataset, APipeThatFailsOrIsCutShortIsOneErrorNamingTheCommand) {
  const std::string shard = five_shards() + "/shard-000000.tar";
  const std::string dir = test::temp_dir("pipe-errors");
  const std::string more = ", size: 20, num_classes: 10";
  auto r = test::trainyard("validate " + shard_experiment(dir, "pipe:cat /nonexistent/shard.tar", "{epochs: 1}", more));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(test::contains(r.err, "shard pipe:cat /nonexistent/shard.tar exited with status 1")) << r.err;
  r = test::trainyard("validate " + shard_experiment(dir, "pipe:head -c 3000 " + shard, "{epochs: 1}", more));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(test::contains(r.err, "shard pipe:head -c 3000 " + shard + ": the stream ends inside a member")) << r.err;
  r = test::trainyard("validate " + shard_experiment(dir, "pipe:cat " + shard, "{epochs: 1}", ", num_classes: 10"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(test::contains(r.err, "size: the samples of one epoch over all ranks")) << r.err;
}

TEST(WebDataset, ARunFromPipeShardsStoppedMidEpochResumesToTheSameWeightsAsOneWithoutAStop) {
  const std::string dir = test::temp_dir("resume-pipe");
  const std::string exp = shard_experiment(dir, "pipe:cat " + five_shards() + "/shard-{000000..000004}.tar",
                                           "{epochs: 100, batch_per_device: 2, decode_threads: 2}",
                                           ", size: 20, num_classes: 10, shuffle_buffer: 6");
  expect_exact_resume(exp, dir);
}

// Hostile shards, written byte by byte: one tar member (a ustar header with
// its checksum right, the body padded to 512 bytes). `size_field` replaces
// the 12 bytes of the size field (octal of the body's length otherwise).
std::string tar_member(const std::string& name, const std::string& body, const std::string& size_field = "",
                       char type = '0') {
  char h[512] = {};
  std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
  std::snprintf(h + 100, 8, "%07o", 0644);
  std::snprintf(h + 108, 8, "%07o", 0);
  std::snprintf(h + 116, 8, "%07o", 0);
  if (size_field.empty())
    std::snprintf(h + 124, 12, "%011o", static_cast<unsigned>(body.size()));
  else
    std::memcpy(h + 124, size_field.data(), std::min<size_t>(size_field.size(), 12));
  std::snprintf(h + 136, 12, "%011o", 0);
  h[156] = type;
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);
  h[155] = ' ';
  return std::string(h, 512) + body + std::string((512 - body.size() % 512) % 512, '\0');
}
const std::string kTarEnd(1024, '\0');

// A small JPEG (16x16, one grey level per sample) and a sample of it.
std::string small_jpeg(int level) {
  return trainyard::image_codec::encode_jpeg(cv::Mat(16, 16, CV_8UC3, cv::Scalar(level, 255 - level, 128)));
}
std::string tar_sample(int key, int label) {
  char name[16];
  std::snprintf(name, sizeof name, "%04d", key);
  return tar_member(std::string(name) + ".jpg", small_jpeg(key * 7 % 256)) +
         tar_member(std::string(name) + ".cls", std::to_string(label));
}
// A base-256 size field: 0x80, then the value big-endian in 11 bytes.
std::string base256(uint64_t v) {
  std::string f(12, '\0');
  f[0] = char(0x80);
  for (int i = 11; i >= 4; --i, v >>= 8) f[i] = char(v & 0xff);
  return f;
}

test::CommandResult validate(const std::string& dir, const std::string& urls, const std::string& more = "") {
  // `timeout`: a reader that loops forever is a failure, not a hung test.
  return test::run_command("timeout 120 " + test::trainyard_binary() + " validate " +
                           shard_experiment(dir, urls, "{epochs: 1}", more));
}

TEST(WebDatasetBounds, ASizeFieldThatWrapsOrIsNotOctalIsNamedAtItsOffsetBeforeAnythingIsAllocated) {
  const std::string dir = test::temp_dir("tar-sizes");
  // Base-256 2^64 - 512: header + size wraps to the header itself (it was re-indexed forever).
  const std::string first = tar_sample(0, 1), at = std::to_string(first.size()),
                    field = std::to_string(first.size() + 124);
  const std::string wraps = dir + "/wraps.tar";
  test::write_file(wraps, first + tar_member("0001.jpg", small_jpeg(9), base256(~uint64_t{0} - 511)) + kTarEnd);
  test::expect_one_error_line(validate(dir, wraps), "shard " + wraps + ": the size field of the header at byte " + at +
                                                        " (byte " + field + ") says " +
                                                        std::to_string(~uint64_t{0} - 511) + " bytes, and only ");
  // A base-256 size past the end, and a negative one.
  const std::string big = dir + "/big.tar";
  test::write_file(big,
                   tar_sample(0, 1) + tar_member("0001.jpg", small_jpeg(9), base256(uint64_t{64} << 30)) + kTarEnd);
  test::expect_one_error_line(validate(dir, big), "(byte " + field + ") says 68719476736 bytes, and only ");
  const std::string negative = dir + "/negative.tar";
  test::write_file(negative,
                   tar_sample(0, 1) + tar_member("0001.jpg", small_jpeg(9), std::string(12, char(0xff))) + kTarEnd);
  test::expect_one_error_line(validate(dir, negative),
                              "(byte " + field + ") is a negative or oversized base-256 number");
  // Not octal: it was read as another size, and the next header was blamed for a wrong checksum.
  const std::string typo = dir + "/typo.tar";
  test::write_file(typo, tar_sample(0, 1) + tar_member("0001.jpg", small_jpeg(9), std::string("0000000g750\0", 12)) +
                             tar_member("0001.cls", "2") + kTarEnd);
  test::expect_one_error_line(validate(dir, typo), "shard " + typo + ": the size field of the header at byte " + at +
                                                       " (byte " + field +
                                                       ") is "
                                                       "'0000000g750.'; expected octal digits");
}

TEST(WebDatasetBounds, APipeMemberIsReadAsItArrivesAndBoundedByTheMemberLimit) {
  const std::string dir = test::temp_dir("pipe-sizes");
  const std::string more = ", size: 20, num_classes: 10";
  // A 9 KB stream that declares a 200 MB image (it allocated the declared size first).
  const std::string claims = dir + "/claims.tar";
  test::write_file(claims, tar_member("0000.jpg", std::string(8192, 'x'), "01372000000") + kTarEnd);
  test::expect_one_error_line(validate(dir, "pipe:cat " + claims, more),
                              "shard pipe:cat " + claims + ": the stream ends inside a member, '0000.jpg' at byte 0 (");
  // Over the limit: refused before any byte of it is read.
  const std::string huge = dir + "/huge.tar";
  test::write_file(huge, tar_member("0000.jpg", small_jpeg(1), base256(uint64_t{64} << 30)) + kTarEnd);
  test::expect_one_error_line(validate(dir, "pipe:cat " + huge, more),
                              "shard pipe:cat " + huge +
                                  ": the member '0000.jpg' at byte 0 says 68719476736 bytes; expected at "
                                  "most 268435456 bytes per image (256 MiB) read from a stream");
}

TEST(WebDatasetBounds, BracePatternsAreBoundedBeforeAnyNameIsMade) {
  // 10^7 names: refused (they were all made first).
  ASSERT_THROW(expand_braces("s-{0..999}-{0..9999}.tar"), trainyard::ConfigError);
  try {
    expand_braces("s-{0000..9999}-{0000..9999}.tar");  // 10^8: ran out of memory
    ADD_FAILURE() << "no error";
  } catch (const trainyard::ConfigError& e) {
    EXPECT_TRUE(test::contains(e.what(), "expands to more than 1000000 names")) << e.what();
  }
  EXPECT_THROW(expand_braces("s-{0..99999999999999999999}.tar"), trainyard::ConfigError);
  EXPECT_EQ(expand_braces("s-{0..999}-{0..999}.tar").size(), 1000000u);
  const std::string dir = test::temp_dir("brace-limit");
  test::expect_one_error_line(validate(dir, dir + "/s-{0000..9999}-{0000..9999}.tar"),
                              "expands to more than 1000000 names");
}

TEST(WebDatasetBounds, AJpegWhoseHeaderClaimsTooManyPixelsIsABadRecordThatSkipSkips) {
  const std::string dir = test::temp_dir("jpeg-bomb");
  // A real JPEG whose frame header says 65500x65500 (12.9 GB of pixels).
  std::string bomb = small_jpeg(200);
  const auto sof = bomb.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  bomb[sof + 5] = bomb[sof + 7] = char(0xff), bomb[sof + 6] = bomb[sof + 8] = char(0xdc);
  std::string shard;
  for (int i = 0; i < 24; ++i) shard += tar_sample(i, i % 3);
  shard += tar_member("0024.jpg", bomb) + tar_member("0024.cls", "1") + kTarEnd;
  test::write_file(dir + "/bomb.tar", shard);
  const std::string loop = "{epochs: 1, batch_per_device: 5}";
  auto r = test::trainyard("run " + shard_experiment(dir, dir + "/bomb.tar", loop) + " --output-dir " + dir + "/a");
  test::expect_one_error_line(
      r, dir +
             "/bomb.tar: 0024.jpg: its header claims 65500x65500 pixels (4290250000), expected at most "
             "178956970 (Pillow's decompression-bomb limit)");
  std::string yaml = test::read_file(shard_experiment(dir, dir + "/bomb.tar", loop));
  yaml.replace(yaml.find("{plugin: webdataset"), 19, "{plugin: webdataset, on_bad_record: skip");
  test::write_file(dir + "/skip.yaml", yaml);
  r = test::trainyard("run " + dir + "/skip.yaml --output-dir " + dir + "/b");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.err, "skipped 1 bad record")) << r.err;
  EXPECT_TRUE(test::contains(r.err, "claims 65500x65500 pixels")) << r.err;
}

TEST(WebDatasetBounds, ADuplicateMemberInASampleIsRefusedNamingShardKeyAndOffset) {
  const std::string dir = test::temp_dir("duplicates");
  const std::string images = dir + "/images.tar", labels = dir + "/labels.tar";
  test::write_file(images, tar_sample(0, 1) + tar_member("0001.jpg", small_jpeg(1)) +
                               tar_member("0001.jpg", small_jpeg(2)) + tar_member("0001.cls", "2") + kTarEnd);
  test::write_file(labels, tar_sample(0, 1) + tar_member("0001.jpg", small_jpeg(1)) + tar_member("0001.cls", "2") +
                               tar_member("0001.cls", "3") + kTarEnd);
  const size_t sample = tar_sample(0, 1).size(), image = tar_member("0001.jpg", small_jpeg(1)).size();
  const std::string second_image = std::to_string(sample + image),
                    second_label = std::to_string(sample + image + 512 + 512);
  test::expect_one_error_line(
      validate(dir, images), "shard " + images + ", sample '0001': a second member '0001.jpg' at byte " + second_image);
  test::expect_one_error_line(
      validate(dir, labels), "shard " + labels + ", sample '0001': a second member '0001.cls' at byte " + second_label);
  const std::string more = ", size: 20, num_classes: 10";
  test::expect_one_error_line(
      validate(dir, "pipe:cat " + images, more),
      "shard pipe:cat " + images + ", sample '0001': a second member '0001.jpg' at byte " + second_image);
  test::expect_one_error_line(
      validate(dir, "pipe:cat " + labels, more),
      "shard pipe:cat " + labels + ", sample '0001': a second member '0001.cls' at byte " + second_label);
}

TEST(WebDatasetBounds, MetadataMembersAreIgnoredAsDocumented) {
  // img2dataset's layout: KEY.jpg, KEY.cls, and a KEY.json of metadata without "label"; and a __meta__.json.
  const std::string dir = test::temp_dir("metadata");
  std::string shard = tar_member("__meta__.json", "{\"source\": \"img2dataset\"}");
  for (int i = 0; i < 3; ++i)
    shard += tar_sample(i, i) + tar_member("000" + std::to_string(i) + ".json",
                                           "{\"url\": \"https://x/" + std::to_string(i) + ".jpg\", \"width\": 16}");
  test::write_file(dir + "/meta.tar", shard + kTarEnd);
  auto r = validate(dir, dir + "/meta.tar");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "dataset webdataset (3 train")) << r.out;
  r = validate(dir, "pipe:cat " + dir + "/meta.tar", ", size: 3, num_classes: 3");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A KEY.json with "label" still labels a sample without KEY.cls.
  test::write_file(dir + "/json.tar",
                   tar_member("0000.jpg", small_jpeg(3)) + tar_member("0000.json", "{\"label\": 2}") + kTarEnd);
  r = validate(dir, dir + "/json.tar");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "dataset webdataset (1 train")) << r.out;
}

TEST(WebDatasetBounds, ALabelInTheBillionsIsRefusedWhenNumClassesIsCountedFromTheLabels) {
  // Was: num_classes 0 took 3000000001 classes from one damaged .cls, and the
  // network's head was sized from it.
  const std::string dir = test::temp_dir("huge-label");
  test::write_file(dir + "/huge.tar", tar_member("0000.jpg", small_jpeg(1)) + tar_member("0000.cls", "1") +
                                          tar_member("0001.jpg", small_jpeg(2)) + tar_member("0001.cls", "3000000000") +
                                          kTarEnd);
  test::expect_one_error_line(validate(dir, dir + "/huge.tar"),
                              "num_classes: 0 counts the classes as the largest label + 1, and " + dir +
                                  "/huge.tar, member 0001.jpg has label 3000000000; expected labels below 1000000 when "
                                  "num_classes is 0");
  // Given explicitly, the count is the user's: the label is then out of its range, as before.
  test::expect_one_error_line(validate(dir, dir + "/huge.tar", ", num_classes: 10"),
                              "num_classes: 10, but the shards hold label 3000000000");
}

// Whether process `pid` has ended, waiting for it at most 30 s (a zombie has ended).
bool process_ends(const std::string& pid) {
  for (int i = 0; i < 3000; ++i) {
    std::ifstream stat("/proc/" + pid + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    const auto close = line.rfind(')');
    if (close != std::string::npos && line.size() > close + 2 && line[close + 2] == 'Z') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(WebDatasetBounds, APipeThatNeverWritesIsTimedOutAtStartUpAndEndedWithTheRun) {
  const std::string dir = test::temp_dir("pipe-silent");
  // The command's own child writes its pid; the command then waits, writing nothing.
  const std::string command = "pipe:sleep 1000 & echo $! > " + dir + "/pid; wait";
  auto r = validate(dir, command, ", size: 20, num_classes: 10, start_timeout: 0.5");
  test::expect_one_error_line(
      r, "shard " + command + ": no complete sample within start_timeout 0.5 s of starting (0 bytes read)");
  EXPECT_TRUE(process_ends(test::read_file(dir + "/pid").substr(0, test::read_file(dir + "/pid").find('\n'))));

  // SIGTERM while it waits (the default timeout, 60 s): the command ends with the run.
  fs::remove(dir + "/pid");
  const std::string exp = shard_experiment(dir, command, "{epochs: 1}", ", size: 20, num_classes: 10");
  // As test::interrupted, with a longer bounded wait for the command to start (a busy machine).
  test::write_file(dir + "/term.sh", test::trainyard_binary() + " run " + exp + " --output-dir " + dir + "/out >" +
                                         dir + "/stdout 2>" + dir + "/err &\npid=$!\nfor i in $(seq 3000); do [ -s " +
                                         dir +
                                         "/pid ] && break; sleep 0.02; done\nkill -TERM $pid\nwait $pid\necho $?\n");
  r = test::run_command("bash " + dir + "/term.sh");
  EXPECT_NE(r.out, "0\n") << test::read_file(dir + "/err");
  const std::string pid = test::read_file(dir + "/pid");
  ASSERT_FALSE(pid.empty());
  const bool ended = process_ends(pid.substr(0, pid.find('\n')));
  EXPECT_TRUE(ended) << "the command's child outlived the run";
  if (!ended) ::kill(std::stoi(pid), SIGKILL);
}

TEST(WebDatasetBounds, ShardsAreOpenedOnDemandSoMoreShardsThanOpenFilesTrain) {
  const std::string dir = test::temp_dir("many-shards");
  for (int s = 0; s < 400; ++s) {
    char name[32];
    std::snprintf(name, sizeof name, "/s-%03d.tar", s);
    test::write_file(dir + name, tar_sample(s, s % 4) + kTarEnd);
  }
  const std::string exp =
      shard_experiment(dir, dir + "/s-{000..399}.tar", "{epochs: 1, batch_per_device: 8, decode_threads: 2}");
  auto r = test::run_command("ulimit -n 256 && " + test::trainyard_binary() + " iterate " + exp);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "iterate: 400 samples")) << r.out;
}

}  // namespace
}  // namespace image_datasets
