// The bad-input corpus: every case gives one clear "error:" line and exit 2,
// and writes nothing (a damaged record, found while training: no checkpoint).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>

#include "support/support.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

struct Case {
  std::string name, command, expected;
};

void expect_one_clear_error(const Case& c) {
  const std::string out = temp_dir("out-" + c.name);
  auto r = trainyard(c.command + " --output-dir " + out);
  EXPECT_EQ(r.exit_code, 2) << c.name << ": " << r.err;
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << c.name << ": " << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << c.name << ": " << r.err;
  EXPECT_TRUE(contains(r.err, c.expected)) << c.name << ": expected '" << c.expected << "' in: " << r.err;
  EXPECT_TRUE(fs::is_empty(out)) << c.name << ": something was written";
}

// A copy of the database `good` whose record `index` is `value` (made at
// `db`), and an experiment that trains and tests on it; the experiment's path.
std::string experiment_with_record(const std::string& name, const std::string& good, int64_t index,
                                   const std::string& value, std::string* db_path = nullptr) {
  const std::string db = temp_dir("db-" + name) + "/fm";
  if (db_path) *db_path = db;
  fs::copy(good, db, fs::copy_options::recursive);
  put_lmdb_record(db, index, value);
  std::string yaml = synthetic_experiment(name);
  for (const std::string split : {"{plugin: synthetic, size: 512, num_classes: 4, shape: [1, 4, 4], seed: 1}",
                                  "{plugin: synthetic, size: 128, num_classes: 4, shape: [1, 4, 4], seed: 2}"})
    yaml.replace(yaml.find(split), split.size(), "{plugin: lmdb, path: " + db + "}");
  const std::string exp = temp_dir("exp-" + name) + "/" + name + ".yaml";
  write_file(exp, yaml);
  return exp;
}

TEST(BadInput, EveryExperimentInTheCorpusIsOneClearErrorAndExitTwo) {
  // tests/bad_inputs/experiments/*.yaml: the first line says what the error must contain.
  int cases = 0;
  for (const auto& f : fs::directory_iterator(source_dir() + "/tests/bad_inputs/experiments")) {
    const std::string first = read_lines(f.path().string()).at(0);
    ASSERT_EQ(first.rfind("# expect: ", 0), 0u) << f.path();
    const std::string name = f.path().stem().string();
    // Both the check and the run refuse it, the same way, before anything is written.
    expect_one_clear_error({name, "run " + f.path().string(), first.substr(10)});
    ++cases;
  }
  EXPECT_GE(cases, 20);
}

TEST(BadInput, ALongValueIsCutInTheErrorLine) {
  // Was: a 40 KB value echoed whole ("got 'xxxx...'" of 40,000 characters).
  const std::string valid = read_file(source_dir() + "/tests/bad_inputs/valid_experiment.yaml");
  const std::string long_value(40000, 'x');
  for (const auto& [where, yaml] : std::vector<std::pair<std::string, std::string>>{
           {"loop.epochs", std::string(valid).replace(valid.find("epochs: 1"), 9, "epochs: " + long_value)},
           {"network.plugin", std::string(valid).replace(valid.find("plugin: mlp"), 11, "plugin: " + long_value)}}) {
    const std::string exp = temp_dir("long-" + where) + "/long.yaml";
    write_file(exp, yaml);
    auto r = trainyard("validate " + exp);
    EXPECT_EQ(r.exit_code, 2) << where;
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << where;
    EXPECT_LT(r.err.size(), 1000u) << where << ": " << r.err.substr(0, 300);
    EXPECT_TRUE(contains(r.err, where + ": ")) << r.err.substr(0, 300);
    EXPECT_TRUE(contains(r.err, "'" + std::string(60, 'x') + "...' (40000 bytes)")) << r.err.substr(0, 300);
  }
  // A value given with --set, checked by a plugin's schema: cut the same way.
  auto r = trainyard("validate " + source_dir() +
                     "/tests/bad_inputs/valid_experiment.yaml --set network.activation=" + long_value);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_LT(r.err.size(), 1000u) << r.err.substr(0, 300);
  EXPECT_TRUE(contains(r.err, "(40000 bytes) is not a valid choice")) << r.err.substr(0, 300);
}

TEST(BadInput, MergeKeysCopyTheAliasedMapAndTheMapsOwnKeysWin) {
  // YAML 1.1's <<: was read as an unknown option, or silently ignored.
  const std::string exp = temp_dir("merge") + "/merge.yaml", out = temp_dir("merge-out");
  write_file(exp,
             "name: merge\n"
             "dataset:\n"
             "  train: &data {plugin: synthetic, size: 64, num_classes: 4, shape: [1, 4, 4], seed: 1}\n"
             "  test: {<<: *data, size: 32, seed: 2}\n"
             "network: {plugin: mlp, hidden_sizes: [8]}\n"
             "loss: {plugin: cross_entropy}\n"
             "optimizer: &sgd {plugin: sgd, lr: 0.1}\n"
             "stages:\n"
             "  - {name: warm, loop: {epochs: 1, batch_per_device: 16}}\n"
             "  - name: main\n"
             "    loop: {<<: [{epochs: 1}, {epochs: 5, batch_per_device: 16}]}\n");
  auto r = trainyard("run " + exp + " --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const YAML::Node config = YAML::LoadFile(out + "/merge/config.yaml");
  const YAML::Node test = config["dataset"]["test"];
  EXPECT_EQ(test["plugin"].as<std::string>(), "synthetic");
  EXPECT_EQ(test["size"].as<int>(), 32);  // its own keys win
  EXPECT_EQ(test["seed"].as<int>(), 2);
  EXPECT_EQ(test["num_classes"].as<int>(), 4);  // the rest from the alias
  EXPECT_FALSE(test["<<"].IsDefined());
  // A list of maps: the earlier one wins.
  EXPECT_EQ(config["stages"][1]["loop"]["epochs"].as<int>(), 1);
  EXPECT_EQ(config["stages"][1]["loop"]["batch_per_device"].as<int>(), 16);
}

TEST(BadInput, EveryCommandLineInTheCorpusIsOneClearErrorAndExitTwo) {
  // tests/bad_inputs/command_lines.txt: flags checked like their YAML twins,
  // output folders that cannot be written, an experiment that is a folder.
  const std::string corpus = source_dir() + "/tests/bad_inputs";
  const std::string file = temp_dir("cl-file") + "/a-file";
  write_file(file, "not a folder\n");
  const std::string fashion = "/usr/share/datasets/fashion-mnist";
  const std::string idx =
      "--images " + fashion + "/t10k-images-idx3-ubyte.gz --labels " + fashion + "/t10k-labels-idx1-ubyte.gz --limit 8";
  auto expand = [&](std::string text, const std::string& out) {
    for (const auto& [from, to] :
         std::vector<std::pair<std::string, std::string>>{{"{exp}", corpus + "/valid_experiment.yaml"},
                                                          {"{out}", out},
                                                          {"{file}", file},
                                                          {"{corpus}", corpus},
                                                          {"{idx}", idx}})
      for (size_t at; (at = text.find(from)) != std::string::npos;) text.replace(at, from.size(), to);
    return text;
  };
  auto trim = [](std::string t) {
    t.erase(0, t.find_first_not_of(' '));
    t.erase(t.find_last_not_of(' ') + 1);
    return t;
  };
  int cases = 0;
  for (const auto& line : read_lines(corpus + "/command_lines.txt")) {
    if (line.empty() || line[0] == '#') continue;
    const size_t a = line.find(" | "), b = line.find(" | ", a + 3);
    ASSERT_NE(b, std::string::npos) << line;
    const std::string name = trim(line.substr(0, a)), expected = expand(trim(line.substr(a + 3, b - a - 3)), "");
    const std::string out = temp_dir("cl-" + name);
    auto r = trainyard(expand(line.substr(b + 3), out));
    EXPECT_EQ(r.exit_code, 2) << name << ": " << r.err;
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << name << ": " << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << name << ": " << r.err;
    EXPECT_TRUE(contains(r.err, expected)) << name << ": expected '" << expected << "' in: " << r.err;
    EXPECT_TRUE(fs::is_empty(out)) << name << ": something was written";
    EXPECT_EQ(read_file(file), "not a folder\n") << name;
    ++cases;
  }
  EXPECT_GE(cases, 20);
}

TEST(BadInput, AnOutputFolderOnAReadOnlyFileSystemIsRefusedBeforeAnything) {
  // A real read-only mount, in a private mount namespace (root ignores
  // permission bits, not a read-only file system).
  const std::string ro = temp_dir("ro");
  if (run_command("unshare -m sh -c 'mount -t tmpfs -o ro tmpfs " + ro + "' 2>/dev/null").exit_code != 0)
    GTEST_SKIP() << "no mount namespace here (needs root or CAP_SYS_ADMIN)";
  auto r = run_command("unshare -m sh -c 'mount -t tmpfs -o ro tmpfs " + ro + " && " + trainyard_binary() + " run " +
                       source_dir() + "/tests/bad_inputs/valid_experiment.yaml --output-dir " + ro + "/runs'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "cannot write in " + ro + " (Read-only file system)")) << r.err;
}

TEST(BadInput, EveryBrokenPluginLibraryIsOneClearErrorAndExitTwo) {
  const std::string exp = source_dir() + "/tests/bad_inputs/experiments/unknown_plugin.yaml";
  const std::vector<std::pair<std::string, std::string>> libraries = {
      {"no_entry", "no 'trainyard_plugin_entry' entry point"},
      {"wrong_major", "SDK API major version differs"},
      {"newer_minor", "built against a newer SDK than this host"},
      {"bad_fingerprint", "build fingerprint differs"},
      {"register_throws", "failed while registering its components"}};
  for (const auto& [dir, expected] : libraries)
    expect_one_clear_error({dir, "run " + exp + " --plugin-dir " + fixture_dir(dir), expected});
}

TEST(BadInput, ANameSeveralLibrariesRegisterIsAmbiguousAndItsQualifiedNameRuns) {
  // twin_a and twin_b register a meter 'confusion_matrix', as the built-in
  // `meters` library does (an outside library meeting a built-in added
  // later): no library is refused. The short name is one error listing the
  // qualified names, before anything is written; a qualified name trains.
  const std::string exp = temp_dir("exp-clash") + "/clash.yaml";
  write_file(exp, synthetic_experiment("clash"));
  const std::string plugins = " --plugin-dir " + fixture_dir("twins");
  expect_one_clear_error({"short", "run " + exp + plugins + " --set meters.0.plugin=confusion_matrix",
                          "meters[0].plugin: meter 'confusion_matrix' is ambiguous: 3 libraries register it "
                          "(meters::confusion_matrix from "});
  expect_one_clear_error({"short", "run " + exp + plugins + " --set meters.0.plugin=confusion_matrix",
                          "write one of meters::confusion_matrix, twin_a::confusion_matrix, twin_b::confusion_matrix"});
  expect_one_clear_error({"twin", "run " + exp + plugins + " --set loss.plugin=twin",
                          "loss 'twin' is ambiguous: 2 libraries register it"});
  expect_one_clear_error({"unknown", "run " + exp + plugins + " --set meters.0.plugin=twin_c::confusion_matrix",
                          "meter 'twin_c::confusion_matrix' is not registered (known meters: coco_map, loss, "
                          "meters::confusion_matrix, miou, retrieval, topk_accuracy, twin_a::confusion_matrix, "
                          "twin_b::confusion_matrix); did you mean 'twin_a::confusion_matrix'?"});
  const std::string out = temp_dir("out-clash");
  auto r = trainyard("run " + exp + plugins + " --output-dir " + out +
                     " --set meters.0.plugin=meters::confusion_matrix --set loop.epochs=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out + "/clash/meters/confusion_matrix-e1.csv")) << r.err;
  EXPECT_TRUE(contains(read_file(out + "/clash/config.yaml"), "meters::confusion_matrix"))
      << read_file(out + "/clash/config.yaml");
}

TEST(BadInput, EveryDamagedRecordInTheCorpusIsOneClearErrorAndExitTwo) {
  // tests/bad_inputs/records/NAME.bin: one LMDB value each, broken in one way;
  // expected.txt: what its error must say. Each goes in as record 3 of a real
  // converted Fashion-MNIST database, which a real run then trains on.
  const std::string corpus = source_dir() + "/tests/bad_inputs/records";
  std::map<std::string, std::string> expected;
  for (const auto& line : read_lines(corpus + "/expected.txt")) {
    if (line.empty() || line[0] == '#') continue;
    expected[line.substr(0, line.find(": "))] = line.substr(line.find(": ") + 2);
  }
  const std::string good = temp_dir("db") + "/fm";
  const std::string fashion = "/usr/share/datasets/fashion-mnist";
  ASSERT_EQ(trainyard("convert --from idx --images " + fashion + "/t10k-images-idx3-ubyte.gz --labels " + fashion +
                      "/t10k-labels-idx1-ubyte.gz --limit 16 --output " + good)
                .exit_code,
            0);
  int cases = 0;
  for (const auto& f : fs::directory_iterator(corpus)) {
    if (f.path().extension() != ".bin") continue;
    const std::string name = f.path().stem().string();
    ASSERT_TRUE(expected.count(name)) << name << " has no line in expected.txt";
    const std::string exp = experiment_with_record(name, good, 3, read_file(f.path().string()));
    const std::string out = temp_dir("out-" + name);
    auto r = trainyard("run " + exp + " --output-dir " + out);
    EXPECT_EQ(r.exit_code, 2) << name << ": " << r.err;
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << name << ": " << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << name << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "dataset 'lmdb'")) << name << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "record 0000000003")) << name << ": " << r.err;
    EXPECT_TRUE(contains(r.err, expected[name])) << name << ": expected '" << expected[name] << "' in: " << r.err;
    EXPECT_EQ(latest_checkpoint(out + "/" + name), "") << name << ": a checkpoint was written";
    ++cases;
  }
  EXPECT_EQ(cases, static_cast<int>(expected.size()));
  EXPECT_GE(cases, 10);
}

// What a dataset finds wrong while it is built is the data's fault, not the
// code's: exit 2 with one line, nothing written (it was exit 1, "failed in
// construction", for these three).
TEST(BadInput, DataErrorsFoundWhileADatasetIsBuiltAreBadInputToo) {
  const std::string fashion = "/usr/share/datasets/fashion-mnist";
  // An idx file whose header counts 0 images (and labels).
  const std::string empty_idx = temp_dir("empty-idx");
  write_file(empty_idx + "/train-images-idx3-ubyte", std::string("\0\0\x08\x03\0\0\0\0\0\0\0\x1c\0\0\0\x1c", 16));
  write_file(empty_idx + "/train-labels-idx1-ubyte", std::string("\0\0\x08\x01\0\0\0\0", 8));
  const std::string exp = source_dir() + "/experiments/fashion_mnist_mlp.yaml";
  expect_one_clear_error({"empty-idx", "run " + exp + " --set dataset.train.directory=" + empty_idx,
                          "train-images-idx3-ubyte: its header gives dimension 0 a size of 0 (no images)"});
  // An LMDB whose first record, read while the dataset is built, is not a
  // trainyard record, or claims an impossible image.
  const std::string good = temp_dir("db") + "/fm";
  ASSERT_EQ(trainyard("convert --from idx --images " + fashion + "/t10k-images-idx3-ubyte.gz --labels " + fashion +
                      "/t10k-labels-idx1-ubyte.gz --limit 16 --output " + good)
                .exit_code,
            0);
  for (const auto& [record, expected] :
       std::map<std::string, std::string>{{"bad_magic", "record 0000000000: not a trainyard record (bad magic)"},
                                          {"huge_side",
                                           "record 0000000000: image of 100000x100000: expected at most "
                                           "16384 pixels per side"}}) {
    std::string db;
    const std::string exp = experiment_with_record(
        record + "-first", good, 0, read_file(source_dir() + "/tests/bad_inputs/records/" + record + ".bin"), &db);
    expect_one_clear_error({record, "run " + exp,
                            "(dataset 'lmdb' from libimage_datasets.so 1.4.0): database '" + db +
                                "': the first sample, read to learn the input shape, is unreadable: " + expected});
  }
}

// A dataset that holds all its labels (AllLabels) has every one checked
// before anything is written, not when a batch reaches the bad one.
TEST(BadInput, ALabelOutOfRangeDeepInAnInMemoryDatasetStopsBeforeAnythingIsWritten) {
  std::string yaml = synthetic_experiment("labels", "plugin_dirs: [" + fixture_dir("components") + "]\n");
  const std::string split = "{plugin: synthetic, size: 512, num_classes: 4, shape: [1, 4, 4], seed: 1}";
  yaml.replace(yaml.find(split), split.size(), "{plugin: labeled_in_memory, bad_at: 300, bad_label: 9}");
  const std::string test_split = "{plugin: synthetic, size: 128, num_classes: 4, shape: [1, 4, 4], seed: 2}";
  yaml.replace(yaml.find(test_split), test_split.size(), "{plugin: labeled_in_memory, size: 64}");
  const std::string exp = temp_dir("exp-labels") + "/labels.yaml";
  write_file(exp, yaml);
  expect_one_clear_error({"labels", "run " + exp,
                          "dataset.train (dataset 'labeled_in_memory' from libtest_components.so 0.1.0): sample 300 "
                          "has label 9 (1 of its 512 labels are out of range; all checked before training); expected a "
                          "class index from 0 to 3 (the training dataset has 4 classes)"});
}

// P x K batches: a class smaller than K, or a batch that is not P x K.
TEST(BadInput, PkBatchesWithAClassSmallerThanKOrAnotherBatchSizeAreRefused) {
  const std::string exp = temp_dir("exp-pk") + "/pk.yaml";
  write_file(exp, synthetic_experiment("pk"));
  expect_one_clear_error({"pk-small",
                          "run " + exp +
                              " --set loop.classes_per_batch=2 --set loop.samples_per_class=200 "
                              "--set loop.batch_per_device=400",
                          "loop.classes_per_batch: class 0 has 128 samples, fewer than loop.samples_per_class 200; "
                          "expected at least K samples in every class of the training set"});
  expect_one_clear_error({"pk-batch", "run " + exp + " --set loop.classes_per_batch=2 --set loop.samples_per_class=8",
                          "loop.batch_per_device: not a P x K batch; expected classes_per_batch x samples_per_class = "
                          "16, got 32; set loop.batch_per_device to 16"});
}

// A misspelt stopping.monitor is refused with the value it resembles before
// the run directory exists.
TEST(BadInput, AMisspeltMonitorIsRefusedWithDidYouMeanBeforeAnythingIsWritten) {
  const std::string exp = temp_dir("exp-monitor") + "/monitor.yaml";
  write_file(exp, synthetic_experiment("monitor", "stopping: {monitor: test_acuracy_top1, patience: 2}\n"));
  expect_one_clear_error({"monitor", "run " + exp,
                          "stopping.monitor: no meter value 'test_acuracy_top1'; expected one of the run's values ("});
  const std::string out = temp_dir("out-monitor-hint");
  auto r = trainyard("run " + exp + " --output-dir " + out);
  EXPECT_TRUE(contains(r.err, "did you mean 'test_accuracy_top1'?")) << r.err;
  // A plot's value names are names of meter values too.
  const std::string plot = temp_dir("exp-plot") + "/plot.yaml";
  write_file(plot, synthetic_experiment("plot", "output: {plots: [{title: Loss, ys: [train_loss, test_los]}]}\n"));
  expect_one_clear_error({"plot", "run " + plot, "output.plots[0].ys: no meter value 'test_los'"});
  r = trainyard("run " + plot + " --output-dir " + temp_dir("out-plot-hint"));
  EXPECT_TRUE(contains(r.err, "did you mean 'test_loss'?")) << r.err;
}

}  // namespace
}  // namespace trainyard::test
