// WebDataset tar shards: trainyard's shards read by the real `webdataset`
// package from PyPI, and shards that package wrote read by trainyard.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <ATen/ATen.h>

#include <trainyard/error.h>

#include "image_dataset.h"
#include "plugins/registry.h"
#include "support/support.h"

namespace fs = std::filesystem;
namespace test = trainyard::test;

namespace image_datasets {
namespace {

std::string shard_experiment(const std::string& dir, const std::string& urls,
                             const std::string& loop = "{epochs: 1, batch_per_device: 4}", const std::string& more = "") {
  const std::string exp = dir + "/exp.yaml";
  test::write_file(exp, "name: shards\ndataset:\n  train: {plugin: webdataset, urls: '" + urls +
                            "', color: rgb, crop: random_resized, crop_size: [64, 64], hflip: 0.5" + more + "}\n"
                            "network: {plugin: mlp, hidden_sizes: [8]}\nloss: {plugin: cross_entropy}\n"
                            "optimizer: {plugin: sgd, lr: 0.01}\nloop: " + loop + "\n");
  return exp;
}

// `exp` run whole, and stopped by SIGTERM mid-run then resumed: the same weights.
void expect_exact_resume(const std::string& exp, const std::string& dir) {
  auto whole = test::trainyard("run " + exp + " --output-dir " + dir + "/whole");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  auto stopped = test::interrupted("run " + exp + " --output-dir " + dir + "/split", dir + "/split/shards/metrics.jsonl",
                                   300, "TERM");
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
  r = test::run_command(std::string(TRAINYARD_PYTHON) + " " + check + " '" + dir + "/shards/shard-{000000..000002}.tar'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "20 90\n") << "2 samples of each class 0..9";

  r = test::trainyard("iterate " + shard_experiment(dir, dir + "/shards/shard-{000000..000002}.tar"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "iterate: 20 samples")) << r.out;
}

TEST(WebDataset, ShardsTheWebdatasetPackageWroteTrainInTrainyard) {
  const std::string dir = test::temp_dir("package-shards");
  const std::string write = dir + "/write.py";
  test::write_file(write,
                   "import os, sys, webdataset as wds\n"
                   "root, out = sys.argv[1], sys.argv[2]\n"
                   "classes = sorted(os.listdir(root))\n"
                   "with wds.ShardWriter(out + '/part-%03d.tar', maxcount=8) as sink:\n"
                   "    for label, c in enumerate(classes):\n"
                   "        for f in sorted(os.listdir(os.path.join(root, c))):\n"
                   "            data = open(os.path.join(root, c, f), 'rb').read()\n"
                   "            sink.write({'__key__': c + '/' + f.split('.')[0], 'jpg': data, 'json': {'label': label}})\n");
  auto r = test::run_command(std::string(TRAINYARD_PYTHON) + " " + write + " " + test::small_photo_set() + "/train " + dir);
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

}  // namespace
}  // namespace image_datasets
