// Experiment workflow: sweeps, provenance, config changes on resume.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <map>
#include <regex>

#include <torch/serialize/input-archive.h>
#include <yaml-cpp/yaml.h>
#include <opencv2/imgproc.hpp>

#include "config/config_diff.h"
#include "scaffold/scaffold.h"
#include "support/support.h"
#include "sweep/sweep.h"
#include "trainyard/error.h"
#include "trainyard/image_codec.h"
#include "trainyard/version.h"
#include "util/sha256.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

std::string experiment(const std::string& name, const std::string& more = "") {
  const std::string path = test::temp_dir("exp") + "/" + name + ".yaml";
  test::write_file(path, test::synthetic_experiment(name, more));
  return path;
}

TEST(Sha256, KnownDigests) {
  // FIPS 180-4 examples.
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sweep, GridParsingExpansionAndNames) {
  GridAxis lr = parse_grid("optimizer.lr=0.1, 0.01");
  EXPECT_EQ(lr.key, "optimizer.lr");
  EXPECT_EQ(lr.values, (std::vector<std::string>{"0.1", "0.01"}));
  GridAxis sizes = parse_grid("network.hidden_sizes=[64],[128, 64]");
  EXPECT_EQ(sizes.values, (std::vector<std::string>{"[64]", "[128, 64]"}));
  auto points = expand_grid("exp", {lr, sizes});
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].name, "exp--optimizer.lr=0.1--network.hidden_sizes=_64_");
  EXPECT_EQ(points[1].name, "exp--optimizer.lr=0.1--network.hidden_sizes=_128__64_");  // last axis fastest
  EXPECT_EQ(points[3].sets(), (std::vector<std::string>{"optimizer.lr=0.01", "network.hidden_sizes=[128, 64]"}));
  EXPECT_THROW(parse_grid("optimizer.lr"), ConfigError);
  EXPECT_THROW(parse_grid("optimizer.lr=0.1,,0.2"), ConfigError);
  EXPECT_THROW(parse_grid("optimizer.lr=0.1,0.1"), ConfigError);
}

TEST(Sweep, ATrialWhoseValueIsNanKeepsItsRowMarkedAndUnranked) {
  // Was: a NaN broke the sort's ordering; its row could vanish from the table or take a rank.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<SweepResult> results(4);
  const std::vector<double> losses = {0.5, nan, 0.25, std::numeric_limits<double>::infinity()};
  for (size_t i = 0; i < results.size(); ++i) {
    results[i].point = {"t" + std::to_string(i), {{"optimizer.lr", std::to_string(i)}}};
    results[i].status = "finished";
    results[i].epochs = 2;
    results[i].metrics = {{"test_loss", losses[i]}};
  }
  const auto table = ranked(results, {"test_loss", /*maximize=*/false});
  ASSERT_EQ(table.size(), 4u);
  EXPECT_EQ(table[0].point.name, "t2");
  EXPECT_EQ(table[0].rank, 1);
  EXPECT_EQ(table[1].point.name, "t0");
  EXPECT_EQ(table[1].rank, 2);
  EXPECT_EQ(table[2].point.name, "t1");  // unranked, in their order
  EXPECT_EQ(table[2].rank, 0);
  EXPECT_EQ(table[2].note, "test_loss is nan: not ranked");
  EXPECT_EQ(table[3].note, "test_loss is inf: not ranked");
  const std::string csv = sweep_csv({"optimizer.lr"}, table), md = sweep_markdown({"optimizer.lr"}, table);
  EXPECT_TRUE(test::contains(csv, ",t1,finished,2,1,nan,")) << csv;
  EXPECT_TRUE(test::contains(csv, "test_loss is nan: not ranked\n")) << csv;
  EXPECT_TRUE(test::contains(md, "| finished (test_loss is nan: not ranked) |")) << md;
  EXPECT_EQ(test::nonempty_lines(csv).size(), 5u) << csv;
}

TEST(Sweep, RunsEveryPointSkipsFinishedResumesUnfinishedAndRecordsFailures) {
  const std::string exp = experiment("sw"), out = test::temp_dir("out");
  const std::string grid =
      " --grid optimizer.lr=0.05,0.2 --grid 'network={plugin: mlp, hidden_sizes: [8]},"
      "{plugin: crashing, crash_at: 3}' --plugin-dir " +
      test::fixture_dir("components") + " --output-dir " + out;
  auto r = test::trainyard("sweep " + exp + grid + " --parallel 2");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // the crashing network fails, the sweep goes on
  const std::string dir = out + "/sw-sweep";
  auto csv = test::read_lines(dir + "/sweep.csv");
  ASSERT_EQ(csv.size(), 5u) << test::read_file(dir + "/sweep.csv");
  EXPECT_TRUE(test::contains(csv[0], "rank,run,status,epochs,optimizer.lr,network,")) << csv[0];
  EXPECT_TRUE(test::contains(csv[0], "test_accuracy_top1")) << csv[0];
  int finished = 0, failed = 0;
  for (size_t i = 1; i < csv.size(); ++i) {
    if (test::contains(csv[i], ",finished,")) ++finished;
    if (test::contains(csv[i], ",failed,")) {
      ++failed;
      EXPECT_TRUE(test::contains(csv[i], "fixture crash in forward")) << csv[i];
    }
  }
  EXPECT_EQ(finished, 2);
  EXPECT_EQ(failed, 2);
  const std::string md = test::read_file(dir + "/sweep.md");
  EXPECT_TRUE(test::contains(md, "| rank | run | status | epochs | optimizer.lr | network |")) << md;
  const std::string good = dir + "/sw--optimizer.lr=0.05--network=_plugin__mlp__hidden_sizes___8__";
  ASSERT_TRUE(fs::exists(good + "/summary.json"));
  // The runs overlaid in one chart per value: the two finished runs, and
  // the crashed ones as far as they logged (they crash before any test).
  ASSERT_TRUE(fs::exists(dir + "/report.html"));
  std::string overlay;
  for (const auto& f : fs::directory_iterator(dir + "/plots"))
    if (test::contains(f.path().filename().string(), "test_accuracy_top1"))
      overlay = test::read_file(f.path().string());
  size_t lines = 0;
  for (size_t at = overlay.find("class=\"series\""); at != std::string::npos;
       at = overlay.find("class=\"series\"", at + 1))
    ++lines;
  EXPECT_EQ(lines, 2u) << overlay;
  EXPECT_TRUE(test::contains(overlay, "sw--optimizer.lr=0.2--network=_plugin__mlp__hidden_sizes___8__")) << overlay;

  // Again: finished runs are skipped; an unfinished one (its last checkpoint
  // and summary gone, as if killed) resumes; the failing ones fail again.
  fs::remove(good + "/summary.json");
  fs::remove(good + "/checkpoints/ckpt-e0002-i00000032.pt");
  auto again = test::trainyard("sweep " + exp + grid);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(test::contains(again.out, "sw--optimizer.lr=0.2--network=_plugin__mlp__hidden_sizes___8__: skipped"))
      << again.out;
  EXPECT_TRUE(test::contains(again.out, "sw--optimizer.lr=0.05--network=_plugin__mlp__hidden_sizes___8__: finished"))
      << again.out;
  EXPECT_TRUE(
      test::contains(test::read_file(dir + "/logs/sw--optimizer.lr=0.05--network=_plugin__mlp__hidden_sizes___8__.log"),
                     "resuming from"));

  // A bad value fails the whole sweep before anything runs.
  auto bad = test::trainyard("sweep " + exp + " --grid optimizer.lr=0.1,-1 --output-dir " + test::temp_dir("bad"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(test::contains(bad.err, "sweep point sw--optimizer.lr=-1: ")) << bad.err;
}

TEST(Provenance, RecordsCommandVersionsThreadsAndPluginHashes) {
  const std::string out = test::temp_dir("out");
  auto r = test::trainyard("run " + experiment("prov") + " --output-dir " + out + " --set loop.epochs=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  YAML::Node p = YAML::LoadFile(out + "/prov/provenance.json");
  EXPECT_TRUE(test::contains(p["command"].as<std::string>(), "run ")) << p["command"];
  EXPECT_TRUE(test::contains(p["command"].as<std::string>(), "loop.epochs=1"));
  EXPECT_FALSE(p["git_commit"].as<std::string>().empty());
  EXPECT_EQ(p["libtorch"].as<std::string>(), TORCH_VERSION);
  EXPECT_EQ(p["cuda"].as<std::string>(), TRAINYARD_CUDA);  // the CUDA LibTorch was built with, or "none"
  EXPECT_EQ(p["nccl"].as<bool>(), std::string(TRAINYARD_NCCL) == "1");
  EXPECT_FALSE(p["hostname"].as<std::string>().empty());
  EXPECT_EQ(p["threads"].as<int>(), 1);
  EXPECT_NE(p["blas"].as<std::string>(), "unknown");  // which BLAS ran: benchmarks must say
  ASSERT_TRUE(p["plugins"].IsSequence());
  bool mlp = false;
  for (const auto& lib : p["plugins"]) {
    if (lib["name"].as<std::string>() != "mlp") continue;
    mlp = true;
    // Checked against coreutils' sha256sum, an independent implementation.
    auto sum = test::run_command("sha256sum " + lib["path"].as<std::string>());
    EXPECT_EQ(sum.out.substr(0, 64), lib["sha256"].as<std::string>());
    EXPECT_EQ(lib["version"].as<std::string>(), "1.0.0");
  }
  EXPECT_TRUE(mlp);
  // Every start appends one line.
  auto again = test::trainyard("run " + experiment("prov") + " --output-dir " + out + " --set loop.epochs=2");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(test::read_lines(out + "/prov/provenance.jsonl").size(), 2u);
}

TEST(ConfigChanges, ExtendingIsAllowedOtherChangesAreRefusedUnlessAsked) {
  const std::string exp = experiment("chg"), out = test::temp_dir("out");
  ASSERT_EQ(test::trainyard("run " + exp + " --output-dir " + out + " --set loop.epochs=1").exit_code, 0);
  auto longer = test::trainyard("run " + exp + " --output-dir " + out + " --set loop.epochs=2");
  ASSERT_EQ(longer.exit_code, 0) << longer.err;
  EXPECT_TRUE(test::contains(longer.out, "loop.epochs: 1 -> 2")) << longer.out;
  auto other = test::trainyard("run " + exp + " --output-dir " + out + " --set loop.epochs=3 --set optimizer.lr=0.5");
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_TRUE(test::contains(other.out, "optimizer.lr: 0.05 -> 0.5 (not allowed on resume)")) << other.out;
  EXPECT_TRUE(test::contains(other.err, "--allow-config-change")) << other.err;
  EXPECT_FALSE(fs::exists(out + "/chg/checkpoints/ckpt-e0003-i00000048.pt"));
  auto forced = test::trainyard("run " + exp + " --output-dir " + out +
                                " --set loop.epochs=3 --set optimizer.lr=0.5 --allow-config-change");
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_TRUE(fs::exists(out + "/chg/checkpoints/ckpt-e0003-i00000048.pt"));

  auto changes = config_changes(
      nlohmann::ordered_json::parse(R"({"loop": {"epochs": 1, "batch_per_device": 8}, "resolved_plugins": ["a"]})"),
      nlohmann::ordered_json::parse(R"({"loop": {"epochs": 2, "batch_per_device": 16}, "resolved_plugins": ["b"]})"));
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].key, "loop.batch_per_device");
  EXPECT_FALSE(changes[0].allowed);
  EXPECT_EQ(changes[1].key, "loop.epochs");
  EXPECT_TRUE(changes[1].allowed);
}

// The keys a resumed run may change are marked where each is declared
// (config/sections.cpp); `describe` lists them, and the comparison reads the
// same marks, in a stage too.
TEST(ConfigChanges, TheKeysThatMayChangeOnResumeAreMarkedInTheSchema) {
  const std::map<std::string, bool> allowed = {
      {"loop.epochs", true},
      {"loop.log_every_iters", true},
      {"loop.decode_threads", true},
      {"loop.prefetch_batches", true},
      {"loop.update_checks_every", true},
      {"loop.stall_timeout_secs", true},
      {"loop.stop_grace_secs", true},
      {"checkpoint.keep", true},
      {"checkpoint.async", true},
      {"distributed.timeout_secs", true},
      {"stages[1].loop.epochs", true},
      {"callbacks[0].every", true},
      {"loop.batch_per_device", false},
      {"loop.precision", false},
      {"stages[1].loop.iter_size", false},
      {"distributed.num_gpus", false},
      {"output.report", false},
      {"optimizer.lr", false},
      {"epochs", false},
  };
  for (const auto& [key, expected] : allowed) {
    // A flattened key is a path: the same path in nested objects and arrays.
    nlohmann::ordered_json before, after;
    auto set = [&](nlohmann::ordered_json& root, int value) {
      root = nlohmann::ordered_json::object();
      root[nlohmann::ordered_json::json_pointer("/" + [&] {
        std::string path = key;
        for (auto& c : path)
          if (c == '.') c = '/';
        for (size_t at; (at = path.find('[')) != std::string::npos;) path.replace(at, 1, "/");
        for (size_t at; (at = path.find(']')) != std::string::npos;) path.erase(at, 1);
        return path;
      }())] = value;
    };
    set(before, 1);
    set(after, 2);
    const auto changes = config_changes(before, after);
    ASSERT_FALSE(changes.empty()) << key;
    EXPECT_EQ(changes.back().key, key);
    EXPECT_EQ(changes.back().allowed, expected) << key;
  }
  const auto loop = test::trainyard("describe loop");
  ASSERT_EQ(loop.exit_code, 0) << loop.err;
  EXPECT_TRUE(
      test::contains(loop.out,
                     "may change when a run resumes: epochs, log_every_iters, decode_threads, prefetch_batches, "
                     "update_checks_every, stall_timeout_secs, stop_grace_secs"))
      << loop.out;
  EXPECT_TRUE(test::contains(test::trainyard("describe checkpoint").out, "may change when a run resumes: keep, async"));
  EXPECT_FALSE(test::contains(test::trainyard("describe stopping").out, "may change when a run resumes"));
}

}  // namespace
}  // namespace trainyard::host

namespace trainyard::host {
namespace {

TEST(DryRun, PrintsTheModuleTreeWithShapesTimingsAndGroupsAndWritesNothing) {
  std::string yaml = test::synthetic_experiment("dry");
  auto replace = [&](const std::string& from, const std::string& to) {
    yaml.replace(yaml.find(from), from.size(), to);
  };
  replace("network: {plugin: mlp, hidden_sizes: [32], dropout: 0.1}",
          "network: {plugin: convnet, channels: [4, 8], hidden: 16}");
  replace("shape: [1, 4, 4], seed: 1", "shape: [1, 8, 8], seed: 1");
  replace("shape: [1, 4, 4], seed: 2", "shape: [1, 8, 8], seed: 2");
  const std::string exp = test::temp_dir("exp") + "/dry.yaml", out = test::temp_dir("out") + "/never";
  test::write_file(exp, yaml);
  auto r = test::trainyard("run " + exp + " --dry-run --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(out));
  for (const char* line :
       {"input batch: [32, 1, 8, 8] Float, target [32]", "(network) ", "-> [32, 4]",
        "features.0 torch::nn::Conv2dImpl (36, 36) -> [32, 4, 8, 8]",
        "features.1 torch::nn::BatchNorm2dImpl (8, 8) -> [32, 4, 8, 8]",
        "features.4 torch::nn::Conv2dImpl (288, 288) -> [32, 8, 4, 4]",
        "classifier.1 torch::nn::LinearImpl (528, 528) -> [32, 16]",
        "classifier.3 torch::nn::LinearImpl (68, 68) -> [32, 4]", "network: convnet (convnet 1.0.0, ",
        "one train step (ms): data ", "one test batch forward ", "parameter groups:"})
    EXPECT_TRUE(test::contains(r.out, line)) << line << "\n" << r.out;
}

}  // namespace
}  // namespace trainyard::host

namespace trainyard::host {
namespace {

YAML::Node json_file(const std::string& path) { return YAML::LoadFile(path); }

TEST(Eval, ReproducesTheRunsFinalTestValuesFromItsCheckpoint) {
  const std::string exp = experiment("ev"), out = test::temp_dir("out");
  ASSERT_EQ(test::trainyard("run " + exp + " --output-dir " + out).exit_code, 0);
  auto r = test::trainyard("eval " + exp + " --output-dir " + out + " --output " + out + "/eval.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "ckpt-e0002-i00000032.pt: test_accuracy_top1=")) << r.out;
  YAML::Node summary = json_file(out + "/ev/summary.json"), eval = json_file(out + "/eval.json");
  for (const char* k : {"test_accuracy_top1", "test_accuracy_top2", "test_loss"})
    EXPECT_DOUBLE_EQ(eval["values"][k].as<double>(), summary["metrics"][k].as<double>()) << k;
  // An older checkpoint gives that epoch's values, and the run's files are untouched.
  const std::string metrics = test::read_file(out + "/ev/metrics.jsonl");
  auto first = test::trainyard("eval " + exp + " --checkpoint " + out + "/ev/checkpoints/ckpt-e0001-i00000016.pt");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(test::read_file(out + "/ev/metrics.jsonl"), metrics);
  auto none = test::trainyard("eval " + exp + " --output-dir " + test::temp_dir("empty"));
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(test::contains(none.err, "no checkpoint to read")) << none.err;
}

TEST(Predict, WritesOneRowPerInputWithTopKClassesFromAnLmdbOrAFolder) {
  // Three classes of 8x8 gray images, dark, middle, bright, with noise.
  const std::string root = test::temp_dir("images"), db = test::temp_dir("db") + "/shapes", out = test::temp_dir("out");
  cv::RNG rng(3);
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 8; ++i) {
      cv::Mat m(8, 8, CV_8UC1);
      rng.fill(m, cv::RNG::UNIFORM, 40 + 80 * c, 60 + 80 * c);
      fs::create_directories(root + "/" + std::string(1, char('a' + c)));
      test::write_file(root + "/" + std::string(1, char('a' + c)) + "/" + std::to_string(i) + ".png",
                       image_codec::encode_png(m));
    }
  ASSERT_EQ(test::trainyard("convert --from folder --input " + root + " --output " + db).exit_code, 0);
  const std::string exp = test::temp_dir("exp") + "/shapes.yaml";
  test::write_file(exp,
                   "name: shapes\nseed: 1\n"
                   "dataset:\n  train: {plugin: lmdb, path: " +
                       db +
                       ", mean: [0.5], std: [0.25]}\n"
                       "  test: {plugin: lmdb, path: " +
                       db +
                       ", mean: [0.5], std: [0.25]}\n"
                       "network: {plugin: mlp, hidden_sizes: [16]}\nloss: {plugin: cross_entropy}\n"
                       "optimizer: {plugin: adam, lr: 0.01}\nmeters: [{plugin: topk_accuracy}]\n"
                       "loop: {epochs: 20, batch_per_device: 8}\ndistributed: {threads_per_process: 1}\n");
  ASSERT_EQ(test::trainyard("run " + exp + " --output-dir " + out).exit_code, 0);
  auto from_db = test::trainyard("predict " + exp + " --output-dir " + out + " --input " + db + " --output " + out +
                                 "/db.csv --topk 2");
  ASSERT_EQ(from_db.exit_code, 0) << from_db.err;
  auto rows = test::read_lines(out + "/db.csv");
  ASSERT_EQ(rows.size(), 25u);
  EXPECT_EQ(rows[0], "index,source,label,class_1,prob_1,class_2,prob_2");
  int right = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    auto cells = split(rows[i], ',');
    ASSERT_EQ(cells.size(), 7u) << rows[i];
    EXPECT_TRUE(cells[3] == "a" || cells[3] == "b" || cells[3] == "c") << rows[i];
    EXPECT_GE(std::stod(cells[4]), std::stod(cells[6])) << rows[i];
    EXPECT_LE(std::stod(cells[4]), 1.0);
    if (cells[2] == cells[3]) ++right;
  }
  EXPECT_GE(right, 22) << "an easy problem: the model should have learned it";
  auto from_folder = test::trainyard("predict " + exp + " --output-dir " + out + " --input " + root + " --output " +
                                     out + "/folder.csv --topk 1");
  ASSERT_EQ(from_folder.exit_code, 0) << from_folder.err;
  auto frows = test::read_lines(out + "/folder.csv");
  ASSERT_EQ(frows.size(), 25u);
  EXPECT_TRUE(test::contains(frows[1], root + "/a/0.png,,a,")) << frows[1];  // sorted paths; label unknown
}

// The demo experiment's test set is Fashion-MNIST's idx files, normalized
// in memory: predict on the same images as an LMDB must preprocess them the
// same way, and so give eval's accuracy.
TEST(Predict, OnTheTestImagesItGivesEvalsAccuracy) {
  const std::string dir = test::temp_dir("fmnist"), data = "/usr/share/datasets/fashion-mnist";
  ASSERT_EQ(test::trainyard("convert --from idx --images " + data + "/t10k-images-idx3-ubyte.gz --labels " + data +
                            "/t10k-labels-idx1-ubyte.gz --output " + dir + "/test.lmdb --limit 2000")
                .exit_code,
            0);
  const std::string exp = test::source_dir() + "/experiments/fashion_mnist_mlp.yaml";
  const std::string small =
      " --set dataset.train.limit=4000 --set dataset.test.limit=2000 --set loop.epochs=1"
      " --output-dir " +
      dir + "/runs";
  ASSERT_EQ(test::trainyard("run " + exp + small).exit_code, 0);
  ASSERT_EQ(test::trainyard("eval " + exp + small + " --output " + dir + "/eval.json").exit_code, 0);
  const double eval_top1 = json_file(dir + "/eval.json")["values"]["test_accuracy_top1"].as<double>();
  auto r = test::trainyard("predict " + exp + small + " --input " + dir + "/test.lmdb --output " + dir + "/p.csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = test::read_lines(dir + "/p.csv");
  ASSERT_EQ(rows.size(), 2001u);
  int right = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto cells = split(rows[i], ',');
    right += cells.at(2) == cells.at(3);  // label, class_1
  }
  EXPECT_GT(eval_top1, 0.5);
  EXPECT_DOUBLE_EQ(right / 2000.0, eval_top1);

  // A test set that cannot say how an image becomes a sample: refused, not guessed.
  const std::string synthetic = test::temp_dir("synthetic") + "/s.yaml";
  test::write_file(synthetic, test::synthetic_experiment("s"));
  ASSERT_EQ(test::trainyard("run " + synthetic + " --output-dir " + dir + "/runs").exit_code, 0);
  r = test::trainyard("predict " + synthetic + " --output-dir " + dir + "/runs --input " + dir +
                      "/test.lmdb --output " + dir + "/s.csv");
  EXPECT_EQ(r.exit_code, 2);
  ASSERT_EQ(test::nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(test::contains(r.err,
                             "error: predict: dataset.test (dataset 'synthetic' (libsynthetic.so)) does "
                             "not say how an image file becomes one of its samples"))
      << r.err;
  EXPECT_FALSE(fs::exists(dir + "/s.csv"));
}

}  // namespace
}  // namespace trainyard::host

namespace trainyard::host {
namespace {

// Python's XML parser: the file is well-formed; prints each series' name and its polyline count.
std::string svg_series(const std::string& svg) {
  auto r = test::run_command(
      "python3 -c \"import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); "
      "print(' '.join(g.getAttribute('data-name') + ':' + str(len(g.getElementsByTagName('polyline'))) "
      "for g in d.getElementsByTagName('g') if g.getAttribute('class') == 'series'))\" " +
      svg);
  return r.exit_code == 0 ? r.out : "not well-formed: " + r.err;
}

TEST(Report, PlotsAsRequestedAndAReportThatRendersInChromium) {
  const std::string exp = experiment("rep",
                                     "output:\n  plots:\n    - {title: Loss, ys: [train_loss, test_loss]}\n"
                                     "    - {x: epoch, ys: [test_accuracy_top1]}\n");
  const std::string out = test::temp_dir("out");
  auto r = test::trainyard("run " + exp + " --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string dir = out + "/rep";
  EXPECT_TRUE(test::contains(r.out, "report in " + dir + "/report.html")) << r.out;
  EXPECT_EQ(svg_series(dir + "/plots/01-loss.svg"), "train_loss:1 test_loss:1\n");
  EXPECT_EQ(svg_series(dir + "/plots/02-test_accuracy_top1.svg"), "test_accuracy_top1:1\n");
  const std::string html = test::read_file(dir + "/report.html");
  for (const char* part : {"<!DOCTYPE html>", "<h1>rep</h1>", "Final values", "test_accuracy_top1", "<svg ",
                           "Provenance", "Plugins", "Resolved configuration", "libmlp.so"})
    EXPECT_TRUE(test::contains(html, part)) << part;
  EXPECT_FALSE(test::contains(html, "http://") && test::contains(html, "<script")) << "self-contained";

  // Regenerated on demand; the default plots when the config asks for none.
  std::filesystem::remove(dir + "/report.html");
  auto again = test::trainyard("report " + dir);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/report.html"));
  const std::string plain = experiment("plain"), pout = test::temp_dir("plain");
  ASSERT_EQ(test::trainyard("run " + plain + " --output-dir " + pout).exit_code, 0);
  EXPECT_EQ(svg_series(pout + "/plain/plots/01-loss.svg"), "test_loss:1 train_loss:1\n");
  // One chart per accuracy: top-1 and top-2 have scales of their own.
  EXPECT_EQ(svg_series(pout + "/plain/plots/02-accuracy__top_1_.svg"), "test_accuracy_top1:1 train_accuracy_top1:1\n");
  EXPECT_EQ(svg_series(pout + "/plain/plots/03-accuracy__top_2_.svg"), "test_accuracy_top2:1 train_accuracy_top2:1\n");
  EXPECT_EQ(svg_series(pout + "/plain/plots/04-learning_rate.svg"), "lr:1\n");
  const std::string loss = test::read_file(pout + "/plain/plots/01-loss.svg");
  EXPECT_TRUE(test::contains(loss, "running means over each epoch")) << "the train values' jumps are explained";
  EXPECT_TRUE(test::contains(loss, "class=\"guide\"")) << "epoch boundaries are drawn";
  EXPECT_TRUE(test::contains(loss, "class=\"legend\"")) << "a legend, below the plot";
  EXPECT_TRUE(test::contains(loss, ">loss</text>")) << "the y axis says what it measures";
  // Two test points get dots; a constant rate of 0.05 sits on a 0..0.06 axis.
  EXPECT_TRUE(test::contains(test::read_file(pout + "/plain/plots/02-accuracy__top_1_.svg"), "<circle "));
  const std::string lr = test::read_file(pout + "/plain/plots/04-learning_rate.svg");
  EXPECT_TRUE(test::contains(lr, ">0.06</text>") && test::contains(lr, ">0</text>")) << lr;
  EXPECT_FALSE(test::contains(lr, ">-0.4</text>")) << lr;
  auto bad = test::trainyard("report " + test::temp_dir("nothing"));
  EXPECT_EQ(bad.exit_code, 2);

  // A real browser draws it: the screenshot is not blank.
  if (test::run_command("command -v chromium").exit_code != 0)
    GTEST_SKIP() << "chromium is not installed (Debian package chromium): the rendering check did not run";
  const std::string shot = test::temp_dir("shot") + "/report.png";
  auto c = test::run_command(
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
      "--window-size=1200,1400 --screenshot=" +
      shot + " file://" + dir + "/report.html");
  ASSERT_TRUE(std::filesystem::exists(shot)) << c.err;
  const auto grey = [](const std::string& png) {  // the screenshot's grey levels
    const std::string bytes = test::read_file(png);
    cv::Mat m = image_codec::decode(bytes.data(), bytes.size());
    if (m.channels() > 1) cv::cvtColor(m, m, m.channels() == 4 ? cv::COLOR_BGRA2GRAY : cv::COLOR_BGR2GRAY);
    return m;
  };
  cv::Mat image = grey(shot);
  ASSERT_FALSE(image.empty());
  const double ink = cv::countNonZero(image < 200) / double(image.total());
  EXPECT_GT(ink, 0.01) << "the page rendered (almost) blank";
  // At a phone's width the charts wrap and still render.
  const std::string narrow = test::temp_dir("shot") + "/narrow.png";
  c = test::run_command(
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
      "--window-size=420,2400 --screenshot=" +
      narrow + " file://" + pout + "/plain/report.html");
  ASSERT_TRUE(std::filesystem::exists(narrow)) << c.err;
  cv::Mat small = grey(narrow);
  ASSERT_FALSE(small.empty());
  EXPECT_GT(cv::countNonZero(small < 200) / double(small.total()), 0.01);
}

}  // namespace
}  // namespace trainyard::host

namespace trainyard::host {
namespace {

std::string nan_experiment(const std::string& name, const std::string& network) {
  std::string yaml = test::synthetic_experiment(name);
  yaml.replace(yaml.find("network: {plugin: mlp, hidden_sizes: [32], dropout: 0.1}"), 56, "network: " + network);
  const std::string path = test::temp_dir("exp-" + name) + "/" + name + ".yaml";
  test::write_file(path, yaml);
  return path;
}

std::string with_fixtures(const std::string& args) { return args + " --plugin-dir " + test::fixture_dir("components"); }

TEST(NonFinite, DebugNamesTheOperationAndTheLayerThatMadeTheNaN) {
  const std::string exp = nan_experiment("dbg", "{plugin: nan_maker, at: 5, how: log}"), out = test::temp_dir("out");
  auto r = test::trainyard(with_fixtures("run " + exp + " --output-dir " + out + " --debug"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(test::contains(r.err,
                             "debug: stopped at iteration 6 (epoch 1, batch 6): non-finite loss; the first "
                             "non-finite value in the forward pass came from aten::log (after layer 'fc1'"))
      << r.err;
  EXPECT_FALSE(
      std::filesystem::exists(out + "/dbg/checkpoints/ckpt-e0000-i00000005.pt"));  // --debug writes no checkpoint

  const std::string grad = nan_experiment("dbg_grad", "{plugin: nan_maker, at: 5, how: grad}");
  auto g = test::trainyard(with_fixtures("run " + grad + " --output-dir " + out + " --debug"));
  EXPECT_EQ(g.exit_code, 1);
  EXPECT_TRUE(test::contains(g.err, "debug: stopped at iteration 6 (epoch 1, batch 6): non-finite gradients")) << g.err;
  EXPECT_TRUE(test::contains(g.err, "fc1.weight")) << g.err;
}

TEST(NonFinite, ErrorPolicyCheckpointsTheLastGoodStateAndSkipPolicyDropsUpdates) {
  const std::string out = test::temp_dir("out");
  // error (the default): stop before the update, checkpoint at that batch.
  auto e = test::trainyard(
      with_fixtures("run " + nan_experiment("err", "{plugin: nan_maker, at: 5}") + " --output-dir " + out));
  EXPECT_EQ(e.exit_code, 1);
  EXPECT_TRUE(test::contains(e.err, "stopped at iteration 6 (epoch 1, batch 6): non-finite loss")) << e.err;
  EXPECT_TRUE(test::contains(e.err, "aten::log")) << e.err;
  ASSERT_TRUE(std::filesystem::exists(out + "/err/checkpoints/ckpt-e0000-i00000005.pt"));
  EXPECT_TRUE(test::checkpoint_tensor(out + "/err/checkpoints/ckpt-e0000-i00000005.pt", "fc1.weight")
                  .isfinite()
                  .all()
                  .item<bool>());

  // skip: one bad update is dropped and counted, the run finishes.
  auto s = test::trainyard(with_fixtures("run " +
                                         nan_experiment("skip", "{plugin: nan_maker, at: 5, once: true, how: grad}") +
                                         " --output-dir " + out + " --set loop.nonfinite=skip"));
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_TRUE(test::contains(s.err, "skipped the update at iteration 6")) << s.err;
  EXPECT_TRUE(test::contains(test::read_file(out + "/skip/summary.json"), "\"skipped_updates\": 1"))
      << test::read_file(out + "/skip/summary.json");
  EXPECT_TRUE(test::checkpoint_tensor(out + "/skip/checkpoints/ckpt-e0002-i00000032.pt", "fc1.weight")
                  .isfinite()
                  .all()
                  .item<bool>());
  // skip, but every update is bad from then on: stops after nonfinite_max_skips in a row.
  auto k =
      test::trainyard(with_fixtures("run " + nan_experiment("skips", "{plugin: nan_maker, at: 5}") + " --output-dir " +
                                    out + " --set loop.nonfinite=skip --set loop.nonfinite_max_skips=3"));
  EXPECT_EQ(k.exit_code, 1);
  EXPECT_TRUE(test::contains(k.err, "stopped at iteration 8")) << k.err;
  EXPECT_TRUE(test::contains(k.err, "(3 updates in a row)")) << k.err;
}

// loop.update_checks_every 4 keeps each update's checks on the device
// between reads, as a GPU run does by default: the CPU runs the same code.
TEST(NonFinite, ChecksKeptOnTheDeviceStopAtTheFirstBadUpdateWithItsWeights) {
  const std::string out = test::temp_dir("out");
  auto checked = test::trainyard(
      with_fixtures("run " + nan_experiment("every", "{plugin: nan_maker, at: 5}") + " --output-dir " + out));
  ASSERT_EQ(checked.exit_code, 1) << checked.err;
  auto kept = test::trainyard(with_fixtures("run " + nan_experiment("kept", "{plugin: nan_maker, at: 5}") +
                                            " --output-dir " + out + " --set loop.update_checks_every=4"));
  EXPECT_EQ(kept.exit_code, 1);
  // Updates 5 to 8 are read together at the 8th; the 6th was the first bad one.
  EXPECT_TRUE(test::contains(kept.err,
                             "stopped at iteration 6 (epoch 1, batch 6): non-finite loss; read at iteration 8 "
                             "(loop.update_checks_every 4), the 2 updates after it skipped too"))
      << kept.err;
  // Checkpointed where the run learned of it, with the weights and momentum
  // of the last good update: those the host-checked run stopped with.
  const std::string at_read = out + "/kept/checkpoints/ckpt-e0000-i00000007.pt";
  const std::string at_bad = out + "/every/checkpoints/ckpt-e0000-i00000005.pt";
  ASSERT_TRUE(std::filesystem::exists(at_read));
  EXPECT_EQ(test::compare_checkpoint_networks(at_bad, at_read, "network"), "");
  EXPECT_EQ(test::compare_optimizer_states(at_bad, at_read), "");

  auto zero = test::trainyard(with_fixtures("validate " + nan_experiment("zero", "{plugin: nan_maker, at: 5}") +
                                            " --set loop.update_checks_every=0"));
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_TRUE(test::contains(zero.err,
                             "loop.update_checks_every: not an update count; expected auto or an integer "
                             "from 1 to 1000000, got '0'"))
      << zero.err;
}

TEST(NonFinite, SkipsKeptOnTheDeviceLeaveWhatTheHostsSkipsLeave) {
  const std::string out = test::temp_dir("out");
  const char* last = "/checkpoints/ckpt-e0002-i00000032.pt";
  // SGD with momentum (fused) and Adam (fused, with its step counts).
  for (const std::string optimizer : {"", " --set 'optimizer={plugin: adam, lr: 0.01}'"}) {
    const std::string tag = optimizer.empty() ? "sgd" : "adam";
    const std::string once = "{plugin: nan_maker, at: 5, once: true, how: grad}";
    auto host = test::trainyard(with_fixtures("run " + nan_experiment("host_" + tag, once) + " --output-dir " + out +
                                              " --set loop.nonfinite=skip" + optimizer));
    ASSERT_EQ(host.exit_code, 0) << host.err;
    const std::string device_run =
        with_fixtures("run " + nan_experiment("device_" + tag, once) + " --output-dir " + out +
                      " --set loop.nonfinite=skip --set loop.update_checks_every=4" + optimizer);
    // Adam's run stops after its first epoch and resumes: the step counts
    // its checkpoint holds leave out the skipped step, as the host's do.
    auto device = test::trainyard(device_run + (tag == "adam" ? " --set loop.epochs=1" : ""));
    ASSERT_EQ(device.exit_code, 0) << device.err;
    EXPECT_TRUE(test::contains(device.err, "skipped 1 non-finite update of the 4 from iteration 5")) << device.err;
    if (tag == "adam") {
      // nan_maker counts its forward calls per process: the resumed one is told to make none.
      auto resumed =
          test::trainyard(device_run + " --allow-config-change --set 'network={plugin: nan_maker, at: 1000000}'");
      ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
      EXPECT_TRUE(test::contains(resumed.out, "resuming from")) << resumed.out;
    }
    EXPECT_TRUE(test::contains(test::read_file(out + "/device_" + tag + "/summary.json"), "\"skipped_updates\": 1"));
    EXPECT_EQ(test::compare_checkpoint_networks(out + "/host_" + tag + last, out + "/device_" + tag + last, "network"),
              "")
        << tag;
    EXPECT_EQ(test::compare_optimizer_states(out + "/host_" + tag + last, out + "/device_" + tag + last), "") << tag;
  }
  // Every update bad from the 6th: the 3rd in a row halts, read at the 8th.
  auto k = test::trainyard(with_fixtures("run " + nan_experiment("device_skips", "{plugin: nan_maker, at: 5}") +
                                         " --output-dir " + out +
                                         " --set loop.nonfinite=skip --set loop.nonfinite_max_skips=3"
                                         " --set loop.update_checks_every=4"));
  EXPECT_EQ(k.exit_code, 1);
  EXPECT_TRUE(test::contains(k.err, "stopped at iteration 8 (epoch 1, batch 8): non-finite loss (3 updates in a row)"))
      << k.err;
}

// Weight averaging with the checks kept on the device: the update the
// optimizer skipped there is blended in with weight 0, its count is taken
// back when the checks are read, and the warmup's decays follow the updates
// that happened: the average equals the host-checked run's, which never
// blends a skipped update in (before, it took in a step that never happened).
TEST(NonFinite, AnUpdateSkippedOnTheDeviceIsLeftOutOfTheWeightAverage) {
  const std::string out = test::temp_dir("out");
  const char* last = "/checkpoints/ckpt-e0002-i00000032.pt";
  const std::string once = "{plugin: nan_maker, at: 5, once: true, how: grad}";
  const std::string ema = " --set loop.nonfinite=skip --set ema.enabled=true --set ema.decay=0.99";
  auto host = test::trainyard(with_fixtures("run " + nan_experiment("host_ema", once) + " --output-dir " + out + ema));
  ASSERT_EQ(host.exit_code, 0) << host.err;
  auto device = test::trainyard(with_fixtures("run " + nan_experiment("device_ema", once) + " --output-dir " + out +
                                              ema + " --set loop.update_checks_every=4"));
  ASSERT_EQ(device.exit_code, 0) << device.err;
  EXPECT_TRUE(test::contains(device.err, "skipped 1 non-finite update of the 4 from iteration 5")) << device.err;
  const std::string a = out + "/host_ema" + last, b = out + "/device_ema" + last;
  EXPECT_EQ(test::compare_checkpoint_networks(a, b, "network"), "");
  // Scaled on the device (difference times weight, added) rather than lerped: equal to float rounding.
  EXPECT_LT(test::max_checkpoint_difference(a, b, "part_ema"), 1e-6);
  const auto updates = [](const std::string& checkpoint) {
    torch::serialize::InputArchive root, part;
    root.load_from(checkpoint);
    root.read("part_ema", part);
    c10::IValue count;
    part.read("updates", count);
    return count.toInt();
  };
  EXPECT_EQ(updates(a), 31);  // 32 updates, one skipped
  EXPECT_EQ(updates(b), 31);
}

}  // namespace
}  // namespace trainyard::host

namespace trainyard::host {
namespace {

TEST(Console, PlainProgressLinesOffATerminalAndALiveBarOnOne) {
  const std::string exp = experiment("con", "callbacks: [{plugin: console, plain_every_secs: 0.000001}]\n");
  auto r = test::trainyard("run " + exp + " --output-dir " + test::temp_dir("out"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.out, "epoch 1/2 [")) << r.out;
  EXPECT_TRUE(test::contains(r.out, " samples/s ETA 0:0")) << r.out;
  EXPECT_TRUE(test::contains(r.out, " run 0:0")) << "the run's ETA\n" << r.out;
  EXPECT_TRUE(test::contains(r.out, "| test_accuracy_top1=")) << "the second epoch's lines show the last test values\n"
                                                              << r.out;
  EXPECT_TRUE(test::contains(r.out, "epoch 2/2 done in ")) << r.out;
  EXPECT_FALSE(test::contains(r.out, "\r\033[K")) << "no terminal control codes in a log file";

  // On a terminal (script(1) gives the run a pseudo-terminal): redrawn in place.
  if (test::run_command("command -v script").exit_code != 0) GTEST_SKIP() << "script(1) (bsdutils) is not installed";
  const std::string live = experiment("live", "callbacks: [{plugin: console, refresh_secs: 0}]\n");
  auto t = test::run_command("script -qec '" + test::trainyard_binary() + " run " + live + " --output-dir " +
                             test::temp_dir("live") + "' /dev/null");
  ASSERT_EQ(t.exit_code, 0) << t.out << t.err;
  EXPECT_TRUE(test::contains(t.out, "\r\033[Kepoch 1/2 [")) << t.out;
  EXPECT_TRUE(test::contains(t.out, "\r\033[Kepoch 1/2 testing [")) << "test progress with a count and ETA\n" << t.out;
}

TEST(NewPlugin, EveryKindBindsItsOptionsToAStructAndEveryPlaceholderIsFilled) {
  // The build tree's host reads host/scaffold/templates/ in the source tree.
  for (const auto& kind : scaffold_kinds()) {
    const auto files = plugin_project("my_thing", kind);
    ASSERT_EQ(files.size(), 3u) << kind;
    const std::string& source = files.at("my_thing.cpp");
    EXPECT_TRUE(test::contains(source, "trainyard::TypedSchema<")) << kind << "\n" << source;
    EXPECT_TRUE(test::contains(source, "schema.bind(o)")) << kind << "\n" << source;
    const std::regex read_by_string(R"(get<[^>]*>\(")");  // o.get<double>("lr"), not std::get<0>(tuple)
    EXPECT_FALSE(std::regex_search(source, read_by_string)) << kind << ": an option read by string\n" << source;
    const std::string entry = "TRAINYARD_PLUGIN(\"my_thing\", \"0.1.0\", \"my_thing (" + kind + ")\"";
    EXPECT_TRUE(test::contains(source, entry)) << source;
    EXPECT_TRUE(test::contains(files.at("README.md"), "plugin: my_thing")) << files.at("README.md");
    const std::string sdk = std::to_string(TRAINYARD_VERSION_MAJOR) + "." + std::to_string(TRAINYARD_VERSION_MINOR);
    EXPECT_TRUE(test::contains(files.at("CMakeLists.txt"), "find_package(Trainyard " + sdk + " REQUIRED)"));
    for (const auto& [file, text] : files)
      for (const char* left : {"@", "NAME", "KIND"}) EXPECT_FALSE(test::contains(text, left)) << file << ": " << left;
  }
}

// The body of the first function in `source` whose declaration contains
// `signature` (from its opening brace to the matching closing one), or "".
std::string function_body(const std::string& source, const std::string& signature) {
  const size_t at = source.find(signature);
  if (at == std::string::npos) return "";
  const size_t open = source.find('{', at);
  int depth = 0;
  for (size_t i = open; i < source.size(); ++i) {
    if (source[i] == '{') ++depth;
    if (source[i] == '}' && --depth == 0) return source.substr(open, i - open + 1);
  }
  return "";
}

TEST(NewPlugin, NoTemplateReadsAValueBackFromTheDeviceAtEveryStep) {
  // docs/writing-a-plugin.md: what runs at every step (a meter's update, a
  // network's forward, a loss's compute) keeps to tensor operations; on a GPU
  // .item(), .cpu(), an accessor or data_ptr waits for the device. Sums stay
  // on the device and are read in accumulators()/values() (the meter), or
  // every N iterations (the callback's log line).
  const std::vector<std::pair<std::string, std::string>> per_step = {
      {"meter", "void update("}, {"network", " forward("}, {"loss", " compute("}};
  for (const auto& [kind, signature] : per_step) {
    const std::string source = plugin_project("my_thing", kind).at("my_thing.cpp");
    const std::string body = function_body(source, signature);
    ASSERT_FALSE(body.empty()) << kind << ": no" << signature << "\n" << source;
    for (const char* read_back : {".item", ".cpu()", "accessor<", "data_ptr", ".to(at::kCPU", ".to(torch::kCPU"})
      EXPECT_FALSE(test::contains(body, read_back)) << kind << ":" << signature << " reads " << read_back << "\n"
                                                    << body;
  }
  // The meter's sums are read where the guide says: accumulators() and values().
  const std::string meter = plugin_project("my_thing", "meter").at("my_thing.cpp");
  EXPECT_TRUE(test::contains(meter, "at::Tensor sums_;")) << meter;
}

TEST(NewPlugin, AMissingTemplateFolderIsOneErrorNamingItAndWritesNothing) {
  const std::string missing = test::temp_dir("scaffold") + "/nowhere", out = test::temp_dir("new") + "/my_net";
  auto r =
      test::trainyard_with_env("TRAINYARD_SCAFFOLD_DIR=" + missing, "new-plugin my_net --kind network --output " + out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const auto lines = test::nonempty_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("error: new-plugin: template folder " + missing +
                               " (TRAINYARD_SCAFFOLD_DIR) does not exist; "
                               "expected the project templates there: CMakeLists.txt.in, plugin.cpp.in",
                           0),
            0u)
      << lines[0];
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace trainyard::host
