// The trainyard command line end to end: real processes, real files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "support/support.h"
#include "trainyard/version.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

std::string experiment(const std::string& name, const std::string& more = "") {
  const std::string path = temp_dir("exp") + "/" + name + ".yaml";
  write_file(path, synthetic_experiment(name, more));
  return path;
}

TEST(Cli, RunWritesConfigMetricsSummaryAndCheckpoints) {
  const std::string out = temp_dir("out");
  auto r = trainyard("run " + experiment("basic") + " --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string dir = out + "/basic";
  std::string config = read_file(dir + "/config.yaml");
  EXPECT_TRUE(contains(config, "activation: relu")) << config;  // defaults are filled in
  std::string json = read_file(dir + "/config.json");
  EXPECT_TRUE(contains(json, "\"plugin\": \"mlp\"")) << json;
  EXPECT_TRUE(contains(json, "\"epochs\": 2")) << json;
  EXPECT_TRUE(contains(json, "\"version\": \"1.0.0\"")) << json;
  auto metrics = read_lines(dir + "/metrics.jsonl");
  ASSERT_FALSE(metrics.empty());
  for (const auto& line : metrics) {
    EXPECT_EQ(line.front(), '{');
    EXPECT_TRUE(contains(line, "\"phase\": ") && contains(line, "\"epoch\": ") && contains(line, "\"iteration\": ") &&
                contains(line, "\"values\": {"))
        << line;
  }
  std::string summary = read_file(dir + "/summary.json");
  for (const char* key :
       {"\"experiment\": \"basic\"", "\"epochs_completed\": 2", "\"test_accuracy_top1\": ", "\"test_accuracy_top2\": ",
        "\"train_loss\": ", "\"test_loss\": ", "\"samples_per_sec\": ", "\"secs_per_train\": ", "\"wall_s\": "})
    EXPECT_TRUE(contains(summary, key)) << key << " in " << summary;
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/ckpt-e0001-i00000016.pt"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/ckpt-e0002-i00000032.pt"));
  for (const auto& e : fs::directory_iterator(dir + "/checkpoints"))  // no temporary file left behind
    EXPECT_FALSE(contains(e.path().filename().string(), ".tmp")) << e.path();
}

TEST(Cli, TheEndOfARunIsATableWithinEightyColumnsAndTheNextCommands) {
  const std::string exp = temp_dir("exp-table") + "/table.yaml", out = temp_dir("out-table");
  write_file(exp, synthetic_experiment("table", "stopping: {monitor: test_loss}\n"));
  auto r = trainyard("run " + exp + " --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = nonempty_lines(r.out);
  auto done = std::find_if(lines.begin(), lines.end(),
                           [](const std::string& l) { return contains(l, "trainyard: done: 2/2 epochs"); });
  ASSERT_NE(done, lines.end()) << r.out;
  auto end = std::find_if(done + 1, lines.end(), [](const std::string& l) { return l.rfind("  ", 0) != 0; });
  ASSERT_EQ(end - done, 5) << r.out;  // done, then the header and accuracy_top1, accuracy_top2, loss
  for (auto it = done + 1; it != end; ++it) EXPECT_LE(it->size(), 80u) << *it;
  auto next = std::find_if(done, lines.end(), [](const std::string& l) { return l.rfind("next: ", 0) == 0; });
  ASSERT_NE(next, lines.end()) << r.out;
  EXPECT_TRUE(contains(*(done + 1), "train") && contains(*(done + 1), "test") &&
              contains(*(done + 1), "best test (epoch)"))
      << *(done + 1);
  // The loss row: the last train and test values as summary.json has them, and the least test loss of the run.
  const auto summary = YAML::LoadFile(out + "/table/summary.json")["metrics"];
  double least = 1e9;
  int64_t at = 0;
  for (const auto& line : read_lines(out + "/table/metrics.jsonl")) {
    const auto event = YAML::Load(line);
    if (event["phase"].as<std::string>() == "test" && event["values"]["test_loss"] &&
        event["values"]["test_loss"].as<double>() < least)
      least = event["values"]["test_loss"].as<double>(), at = event["epoch"].as<int64_t>();
  }
  const std::string loss_row = *(done + 4);
  EXPECT_EQ(loss_row.rfind("  loss ", 0), 0u) << loss_row;
  EXPECT_TRUE(contains(loss_row, " " + host::readable_number(summary["train_loss"].as<double>()) + " ")) << loss_row;
  EXPECT_TRUE(contains(loss_row, " " + host::readable_number(summary["test_loss"].as<double>()) + " ")) << loss_row;
  EXPECT_TRUE(contains(loss_row, host::readable_number(least) + " (" + std::to_string(at) + ")")) << loss_row;
  EXPECT_TRUE(contains(*next, "trainyard report " + out + "/table")) << *next;
  EXPECT_TRUE(contains(r.out, "trainyard export " + out + "/table --format safetensors")) << r.out;
}

TEST(Cli, RunAgainResumesAndSaysSo) {
  const std::string out = temp_dir("out"), exp = experiment("again");
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out).exit_code, 0);
  auto r = trainyard("run " + exp + " --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "resuming from " + out + "/again/checkpoints/ckpt-e0002-i00000032.pt")) << r.out;
  EXPECT_TRUE(contains(r.out, "all 2 epochs are already done")) << r.out;
  // Nothing was trained: the summary of the run that trained stays.
  EXPECT_TRUE(contains(read_file(out + "/again/summary.json"), "\"test_accuracy_top1\": "))
      << read_file(out + "/again/summary.json");
  r = trainyard("run " + exp + " --output-dir " + out + " --set loop.epochs=3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out + "/again/checkpoints/ckpt-e0003-i00000048.pt"));
}

TEST(Cli, FreshStartsOverAndKeepsTheOldRun) {
  const std::string out = temp_dir("out"), exp = experiment("fresh");
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out + " --set loop.epochs=1").exit_code, 0);
  auto r = trainyard("run " + exp + " --output-dir " + out + " --set loop.epochs=1 --fresh");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(contains(r.out, "resuming")) << r.out;
  int kept = 0;
  for (const auto& e : fs::directory_iterator(out)) kept += contains(e.path().string(), "fresh.replaced-");
  EXPECT_EQ(kept, 1);
}

// Bad input: exit code 2, one "error:" line, nothing written.
void expect_bad_input(const std::string& args, const std::string& message) {
  const std::string out = temp_dir("bad-out");
  fs::remove_all(out);
  auto r = trainyard("run " + args + " --output-dir " + out);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(contains(r.err, message)) << "expected '" << message << "' in: " << r.err;
  EXPECT_FALSE(fs::exists(out)) << args;
}

TEST(Cli, BadInputExitsTwoWithOneLineAndWritesNothing) {
  const std::string exp = experiment("bad");
  expect_bad_input(exp + " --set network.plugin=mpl", "did you mean 'mlp'?");
  expect_bad_input(exp + " --set optimizer.lrr=0.1", "--set optimizer.lrr=0.1");
  expect_bad_input(exp + " --set nosuch.key=1", "key 'nosuch' does not exist");
  expect_bad_input(exp + " --plugin-dir /nonexistent/folder", "/nonexistent/folder: plugin folder does not exist");
  // A library named where its folder belongs: said to be a file, with the folder to name instead.
  const std::string library = fixture_dir("wrong_major") + "/libwrong_major.so";
  expect_bad_input(exp + " --plugin-dir " + library,
                   library +
                       ": is a file, not a plugin folder (named by --plugin-dir); expected a folder holding "
                       "plugin libraries (*.so); name the folder that holds it (" +
                       fixture_dir("wrong_major") + ")");
  expect_bad_input(exp + " --plugin-dir " + fixture_dir("wrong_major"), "SDK API major version differs");
  expect_bad_input(exp + " --plugin-dir " + fixture_dir("bad_fingerprint"), "build fingerprint differs");
  expect_bad_input(exp + " --plugin-dir " + fixture_dir("no_entry"), "no 'trainyard_plugin_entry' entry point");
  expect_bad_input(temp_dir("none") + "/missing.yaml", "missing.yaml: experiment file does not exist");
  expect_bad_input(exp + " --bogus-flag", "unrecognised option '--bogus-flag'");
}

TEST(Cli, MissingOrTruncatedDatasetFilesAreBadInput) {
  const std::string exp = temp_dir("exp") + "/fm.yaml";
  const std::string data = temp_dir("data");
  std::string yaml = synthetic_experiment("fm");
  const std::string train = "{plugin: synthetic, size: 512, num_classes: 4, shape: [1, 4, 4], seed: 1}";
  yaml.replace(yaml.find(train), train.size(), "{plugin: fashion_mnist, directory: " + data + "}");
  write_file(exp, yaml);
  expect_bad_input(exp, "train-images-idx3-ubyte.gz: file does not exist");
  // Valid header promising 60000 labels, then only 10 bytes.
  std::string labels("\x00\x00\x08\x01\x00\x00\xea\x60", 8);
  labels += std::string(10, '\x01');
  std::string images("\x00\x00\x08\x03\x00\x00\x00\x01\x00\x00\x00\x1c\x00\x00\x00\x1c", 16);
  images += std::string(28 * 28, '\x10');
  write_file(data + "/train-images-idx3-ubyte", images);
  write_file(data + "/train-labels-idx1-ubyte", labels);
  expect_bad_input(exp, "train-labels-idx1-ubyte: truncated; expected 60000 data bytes, got 10");
  // Images damaged past their header (libdeflate refuses them, zlib's reader names the damage).
  write_file(data + "/train-labels-idx1-ubyte", std::string("\x00\x00\x08\x01\x00\x00\x00\x01\x00", 9));
  write_file(data + "/train-images-idx3-ubyte", images.substr(0, 16 + 100));
  expect_bad_input(exp, "train-images-idx3-ubyte: truncated; expected 784 data bytes, got 100");
  expect_bad_input(exp + " --set dataset.train.directory=/nonexistent", "directory '/nonexistent' does not exist");
}

TEST(Cli, AGzipCrcErrorInAnIdxFileIsNamedAsOne) {
  // Real Fashion-MNIST files, the labels' gzip trailer CRC-32 changed: the
  // data inflates, its check fails (it was reported as "not an idx file").
  const std::string fashion = "/usr/share/datasets/fashion-mnist", data = temp_dir("data");
  if (!fs::exists(fashion + "/t10k-labels-idx1-ubyte.gz")) GTEST_SKIP() << "needs " << fashion;
  fs::copy_file(fashion + "/t10k-images-idx3-ubyte.gz", data + "/train-images-idx3-ubyte.gz");
  std::string labels = read_file(fashion + "/t10k-labels-idx1-ubyte.gz");
  labels[labels.size() - 8] = static_cast<char>(labels[labels.size() - 8] ^ 0x5a);
  write_file(data + "/train-labels-idx1-ubyte.gz", labels);
  std::string yaml = synthetic_experiment("fm");
  const std::string train = "{plugin: synthetic, size: 512, num_classes: 4, shape: [1, 4, 4], seed: 1}";
  yaml.replace(yaml.find(train), train.size(), "{plugin: fashion_mnist, directory: " + data + "}");
  const std::string exp = temp_dir("exp") + "/fm.yaml";
  write_file(exp, yaml);
  expect_bad_input(exp, data + "/train-labels-idx1-ubyte.gz: fails its gzip integrity check (incorrect data check");
}

TEST(Cli, ANonUtf8SetValueIsRefusedNamingItsKey) {
  // Was accepted; the run's config.yaml then could not be read back (no resume, no export).
  const std::string exp = experiment("latin1");
  expect_bad_input(exp + " --set 'extra.note=caf\xe9'",
                   "error: --set extra.note: the value is not UTF-8 text (byte 0xe9 at offset 3 of the value); "
                   "expected UTF-8 text");
  expect_bad_input(exp + " --set 'output.dir=runs-\xc3\x28'",
                   "--set output.dir: the value is not UTF-8 text (byte 0xc3");
  expect_bad_input(exp + " --set 'extra.note=\xed\xa0\x80'", "(byte 0xed at offset 0 of the value)");  // a surrogate
  const std::string out = temp_dir("out");
  auto r = trainyard("run " + exp + " --output-dir " + out + " --set loop.epochs=1 --set 'extra.note=caf\xc3\xa9'");
  EXPECT_EQ(r.exit_code, 0) << r.err;  // UTF-8 is fine
}

TEST(Cli, AReadOnlyRunDirectoryIsNamedAsOneNotAsABadCheckpoint) {
  // Was: "no checkpoint of this run could be loaded (...); ... run with --fresh".
  const std::string out = temp_dir("out"), exp = experiment("ro"), run = out + "/ro";
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out + " --set loop.epochs=1").exit_code, 0);
  const std::string again = trainyard_binary() + " run " + exp + " --output-dir " + out + " --set loop.epochs=2";
  CommandResult r;
  if (::geteuid() != 0) {
    fs::permissions(run, fs::perms(0555));
    r = run_command(again);
    fs::permissions(run, fs::perms(0755));
  } else {
    // Root writes through permissions: a read-only bind mount in a mount namespace of its own.
    const std::string ro = "unshare -m sh -c 'mount --bind " + run + " " + run + " && mount -o remount,ro,bind " + run;
    if (run_command(ro + " && ! touch " + run + "/probe 2>/dev/null'").exit_code != 0)
      GTEST_SKIP() << "no read-only bind mount here (needs unshare and mount)";
    r = run_command(ro + " && " + again + "'");
  }
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "error: " + run + ": the run directory is not writable (")) << r.err;
  EXPECT_FALSE(contains(r.err, "could be loaded")) << r.err;
}

TEST(Cli, PretrainedInitializesTheNetworkOrNamesTheMismatch) {
  const std::string out = temp_dir("out");
  ASSERT_EQ(trainyard("run " + experiment("source") + " --output-dir " + out + " --set loop.epochs=1").exit_code, 0);
  const std::string checkpoint = out + "/source/checkpoints/ckpt-e0001-i00000016.pt";
  auto r = trainyard("run " + experiment("target") + " --output-dir " + out + " --set loop.epochs=1" +
                     " --set network.pretrained=" + checkpoint);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "pretrained: 4 tensors loaded from " + checkpoint)) << r.err;
  expect_bad_input(experiment("wider") + " --set network.hidden_sizes=[64] --set network.pretrained=" + checkpoint,
                   "parameter shapes do not fit the network: layers.0.weight (file [32, 16], network [64, 16])");
  expect_bad_input(experiment("nofile") + " --set network.pretrained=/nonexistent.pt", "file does not exist");
}

TEST(Cli, PluginCrashIsReportedWithItsName) {
  std::string yaml = synthetic_experiment("crash");
  const std::string network = "{plugin: mlp, hidden_sizes: [32], dropout: 0.1}";
  yaml.replace(yaml.find(network), network.size(), "{plugin: crashing, crash_at: 3}");
  const std::string exp = temp_dir("exp") + "/crash.yaml";
  write_file(exp, yaml);
  auto r = trainyard("run " + exp + " --output-dir " + temp_dir("out") + " --plugin-dir " + fixture_dir("components"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err,
                       "error: network 'crashing' from libtest_components.so 0.1.0 failed in forward: "
                       "fixture crash in forward"))
      << r.err;
}

TEST(Cli, PluginSegfaultIsReportedWithItsName) {
  std::string yaml = synthetic_experiment("segv");
  const std::string network = "{plugin: mlp, hidden_sizes: [32], dropout: 0.1}";
  yaml.replace(yaml.find(network), network.size(), "{plugin: crashing, crash_at: 2, how: segfault}");
  const std::string exp = temp_dir("exp") + "/segv.yaml";
  write_file(exp, yaml);
  auto r = trainyard("run " + exp + " --output-dir " + temp_dir("out") + " --plugin-dir " + fixture_dir("components"));
  EXPECT_EQ(r.exit_code, 128 + 11);  // died of SIGSEGV, as it should (core dumps still work)
  EXPECT_TRUE(contains(r.err, "error: crashed with SIGSEGV in network 'crashing' (network) from " +
                                  fixture_dir("components") + "/libtest_components.so"))
      << r.err;
}

TEST(Cli, ValidateBuildsEverythingWithoutTraining) {
  const std::string exp = experiment("valid");
  auto r = trainyard("validate " + exp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "ok: " + exp + " (valid): dataset synthetic (512 train, 128 test samples), network mlp"))
      << r.out;
  r = trainyard("validate " + exp + " --set loop.epochs=-1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "loop.epochs: value out of range; expected between 0 and 1000000, got -1")) << r.err;
}

TEST(Cli, SavedConfigValidatesFromAnotherWorkingDirectory) {
  // plugin_dirs relative to the experiment file, and a component found there.
  const std::string exp_dir = temp_dir("saved_config_exp"), out = temp_dir("out"), elsewhere = temp_dir("elsewhere");
  const std::string plugins = fs::relative(fixture_dir("components"), exp_dir).string();
  const std::string exp = exp_dir + "/saved.yaml";
  write_file(exp, synthetic_experiment("saved",
                                       "plugin_dirs: [" + plugins + "]\noverrides: [{plugin: pass_through_epoch}]\n"));
  auto r = run_command("cd " + exp_dir + " && " + trainyard_binary() + " run saved.yaml --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string config = read_file(out + "/saved/config.yaml");
  EXPECT_TRUE(contains(config, fixture_dir("components"))) << config;  // written absolute
  r = run_command("cd " + elsewhere + " && " + trainyard_binary() + " validate " + out + "/saved/config.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "ok: " + out + "/saved/config.yaml (saved)")) << r.out;
}

TEST(Cli, PluginsListsLibrariesWithVersionsAndComponents) {
  auto r = trainyard("plugins --plugin-dir " + fixture_dir("components"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "libmlp.so\n  mlp 1.0.0 (API " + std::string(sdk_api_version()) + "), fingerprint ok"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "  meters: coco_map, confusion_matrix, loss, miou, topk_accuracy\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "libtest_components.so")) << r.out;
  r = trainyard("plugins --plugin-dir " + fixture_dir("newer_minor"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.out, "REFUSED: ")) << r.out;
  EXPECT_TRUE(contains(r.out, "libmlp.so")) << r.out;  // the others are still listed
}

TEST(Cli, DescribePrintsOptionsWithTypesDefaultsAndConstraints) {
  auto r = trainyard("describe mlp");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "mlp (network) from ")) << r.out;
  EXPECT_TRUE(contains(r.out, "  hidden_sizes\n      type: list of integers\n      default: [256, 128]")) << r.out;
  EXPECT_TRUE(contains(r.out, "one of: relu, tanh, gelu, sigmoid")) << r.out;
  r = trainyard("describe loop");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_TRUE(contains(r.out, "  epochs\n      type: integer\n      default: 1")) << r.out;
  r = trainyard("describe mpl");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "did you mean 'mlp'?")) << r.err;
}

TEST(Cli, HelpAndVersionWorkEverywhere) {
  for (const char* command : {"", "run ", "validate ", "plugins ", "describe "}) {
    auto help = trainyard(std::string(command) + "--help");
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_TRUE(contains(help.out, "usage: trainyard")) << command << help.out;
    auto version = trainyard(std::string(command) + "--version");
    EXPECT_EQ(version.exit_code, 0) << command;
    EXPECT_TRUE(contains(version.out, "trainyard " + std::string(TRAINYARD_VERSION) + " (SDK API " +
                                          std::string(sdk_api_version()) + ", "))
        << command << version.out;
  }
  auto r = trainyard("trian x.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "unknown command 'trian'")) << r.err;
}

TEST(Cli, EveryShippedExperimentAndRecipeValidates) {
  // What users copy from: experiments/*.yaml and experiments/recipes/*.yaml.
  // Those reading data a script makes (the converted LMDB databases, the
  // photo set) validate when it exists, and otherwise fail with one error
  // line naming it.
  const std::string root = source_dir() + "/experiments";
  const std::vector<std::pair<std::string, std::string>> made_data = {
      {"fashion_mnist_lmdb", "/data/fashion_mnist_lmdb/train/data.mdb"},
      {"photo-set", "/data/photo-set/val"},
      {"nuclei-set", "/data/nuclei-set/test"},
      {"scene-set", "/data/scene-set/test"}};
  int checked = 0;
  for (const std::string& folder : {root, root + "/recipes"})
    for (const auto& f : fs::directory_iterator(folder)) {
      if (f.path().extension() != ".yaml") continue;
      ++checked;
      std::string missing;
      for (const auto& [name, marker] : made_data)
        if (contains(read_file(f.path().string()), "data/" + name) && !fs::exists(source_dir() + marker))
          missing = name;
      auto r = trainyard("validate " + f.path().string());
      if (missing.empty()) {
        EXPECT_EQ(r.exit_code, 0) << f.path() << "\n" << r.err;
      } else {
        EXPECT_EQ(r.exit_code, 2) << f.path() << "\n" << r.err;
        EXPECT_TRUE(contains(r.err, missing)) << f.path() << "\n" << r.err;
      }
    }
  EXPECT_GE(checked, 8);
}

TEST(Cli, DemoExperimentLearnsFashionMnist) {
  // The README's main job, on the real data set: at least 0.87 test top-1 in 2 epochs (0.880 measured).
  const std::string out = temp_dir("out");
  auto r = trainyard("run " + source_dir() + "/experiments/fashion_mnist_mlp.yaml --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string summary = read_file(out + "/fashion_mnist_mlp/summary.json");
  auto at = summary.find("\"test_accuracy_top1\": ");
  ASSERT_NE(at, std::string::npos) << summary;
  EXPECT_GE(std::stod(summary.substr(at + 22)), 0.87) << summary;
  EXPECT_TRUE(contains(summary, "\"epochs_completed\": 2")) << summary;
}

}  // namespace
}  // namespace trainyard::test

namespace trainyard::test {
namespace {

// Where plugins are looked for, as a user of other plugin hosts expects.
TEST(PluginFolders, UserFolderByDefaultAMissingPathFolderWarnsAndDescribeSaysWhereItLooked) {
  const std::string data = temp_dir("xdg");
  const std::string user = data + "/trainyard/plugins";
  fs::create_directories(user);
  fs::copy_file(fixture_dir("twins") + "/libtwin_a.so", user + "/libtwin_a.so");
  auto r = trainyard_with_env("XDG_DATA_HOME=" + data, "plugins");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "folder: " + user + " (user folder)")) << r.out;
  EXPECT_TRUE(contains(r.out, user + "/libtwin_a.so")) << r.out;
  r = trainyard_with_env("XDG_DATA_HOME=" + data, "describe twin");  // what libtwin_a registers
  EXPECT_EQ(r.exit_code, 0) << r.err;

  // A TRAINYARD_PLUGIN_PATH folder that is not there: a warning naming it, not an error.
  r = trainyard_with_env("XDG_DATA_HOME=" + data + " TRAINYARD_PLUGIN_PATH=/nonexistent/plugins", "plugins");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err,
                       "warning: /nonexistent/plugins: plugin folder does not exist (named by "
                       "TRAINYARD_PLUGIN_PATH); skipped"))
      << r.err;
  // A missing --plugin-dir stays an error.
  r = trainyard("plugins --plugin-dir /nonexistent/plugins");
  EXPECT_EQ(r.exit_code, 2) << r.err;

  // An unknown name: which folders were searched, and how to add one.
  r = trainyard_with_env("XDG_DATA_HOME=" + data + "/elsewhere", "describe my_net");
  EXPECT_EQ(r.exit_code, 2);
  ASSERT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "searched " + builtin_plugin_dir())) << r.err;
  EXPECT_TRUE(contains(r.err, data + "/elsewhere/trainyard/plugins (user folder, absent)")) << r.err;
  EXPECT_TRUE(contains(r.err, "add a folder with --plugin-dir DIR")) << r.err;
}

TEST(Cli, HelpShowsDefaultsReadably) {
  auto r = trainyard("find-lr --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(contains(r.out, "--min-lr arg (=1e-06)")) << r.out;
  EXPECT_FALSE(contains(r.out, "9.99999")) << r.out;
}

}  // namespace
}  // namespace trainyard::test

namespace trainyard::test {
namespace {

// The leveled log: --log-level filters the console; the run's log file keeps every level.
TEST(Log, TheLevelFiltersTheConsoleAndTheRunLogKeepsEverything) {
  const std::string dir = temp_dir("log");
  write_file(dir + "/l.yaml", synthetic_experiment("l"));
  auto quiet = trainyard("run " + dir + "/l.yaml --output-dir " + dir + " --log-level warning");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_FALSE(contains(quiet.out, "trainyard: done:")) << quiet.out;
  const std::string log = read_file(dir + "/l/trainyard.log");
  EXPECT_TRUE(contains(log, " info trainyard: l: network mlp")) << log;
  EXPECT_TRUE(contains(log, " info trainyard: done: 2/2 epochs")) << log;
  auto loud = trainyard_with_env("TRAINYARD_LOG_LEVEL=info", "run " + dir + "/l.yaml --output-dir " + dir + " --fresh");
  EXPECT_TRUE(contains(loud.out, "trainyard: done: 2/2 epochs")) << loud.out;
  auto bad = trainyard("validate " + dir + "/l.yaml --log-level chatty");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(nonempty_lines(bad.err).size(), 1u) << bad.err;
  EXPECT_TRUE(
      contains(bad.err, "error: --log-level 'chatty' (or TRAINYARD_LOG_LEVEL); expected error, warning, info or debug"))
      << bad.err;
}

}  // namespace
}  // namespace trainyard::test
