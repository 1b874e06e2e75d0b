// WebDataset tar shards: trainyard's shards read by the real `webdataset`
// package from PyPI, and shards that package wrote read by trainyard.
#include <gtest/gtest.h>

#include <filesystem>

#include <trainyard/error.h>

#include "image_dataset.h"
#include "support/support.h"

namespace fs = std::filesystem;
namespace test = trainyard::test;

namespace image_datasets {
namespace {

std::string shard_experiment(const std::string& dir, const std::string& urls,
                             const std::string& loop = "{epochs: 1, batch_per_device: 4}") {
  const std::string exp = dir + "/exp.yaml";
  test::write_file(exp, "name: shards\ndataset:\n  train: {plugin: webdataset, urls: '" + urls +
                            "', color: rgb, crop: random_resized, crop_size: [64, 64], hflip: 0.5}\n"
                            "network: {plugin: mlp, hidden_sizes: [8]}\nloss: {plugin: cross_entropy}\n"
                            "optimizer: {plugin: sgd, lr: 0.01}\nloop: " + loop + "\n");
  return exp;
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

}  // namespace
}  // namespace image_datasets
