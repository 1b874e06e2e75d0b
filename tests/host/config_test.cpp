// Validation of experiment files against the host's and the plugins' schemas.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/config_file.h"
#include "config/experiment.h"
#include "config/snapshot.h"
#include "plugins/library_loader.h"
#include "support/support.h"
#include "trainyard/error.h"

namespace trainyard::host {
namespace {

using test::contains;

// A resolved option as the host holds it (Options::get<T> is the deprecated
// plugin-side 0.x call).
template <class T>
const T& option(const Options& options, const std::string& key) {
  return std::get<T>(options.values().at(key));
}

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    load_plugin_folders({{test::builtin_plugin_dir(), "built-in"}, {test::fixture_dir("components"), "test"}}, reg);
    return reg;
  }();
  return r;
}

std::string write_experiment(const std::string& yaml) {
  std::string path = test::temp_dir("exp") + "/exp.yaml";
  test::write_file(path, yaml);
  return path;
}

Experiment load(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return validate_experiment(read_experiment(write_experiment(yaml), sets), registry());
}

// The error message of loading `yaml`, or "" if it loaded.
std::string error_of(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  try {
    load(yaml, sets);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

const std::string kBase = test::synthetic_experiment("cfg");

TEST(ExperimentConfig, ValidExperimentFillsDefaults) {
  Experiment e = load(kBase);
  EXPECT_EQ(e.name, "cfg");
  EXPECT_EQ(e.seed, 7u);
  EXPECT_EQ(e.loop.epochs, 2);
  EXPECT_EQ(e.loop.test_every_iters, 0);                                    // default
  EXPECT_EQ(option<std::string>(e.network.options, "activation"), "relu");  // plugin default
  EXPECT_EQ(option<std::vector<int64_t>>(e.network.options, "hidden_sizes"), std::vector<int64_t>{32});
  EXPECT_DOUBLE_EQ(option<double>(e.optimizer.options, "lr"), 0.05);
  ASSERT_EQ(e.meters.size(), 2u);
  EXPECT_EQ(option<std::vector<int64_t>>(e.meters[1].options, "k"), (std::vector<int64_t>{1, 2}));
}

// One `checkpoint:` section. Its keys' old names (loop.checkpoint_every_iters,
// loop.checkpoint_every_secs, output.keep_checkpoints, stopping.keep_best)
// still read, in the file, a stage or a --set, with one deprecation line
// naming where; both names at once are refused; a config recorded with the
// old names (a run before the move) resumes as unchanged.
TEST(ExperimentConfig, CheckpointKeysUnderTheirOldNamesReadAsTheNewOnes) {
  const std::string loop = "loop: {epochs: 2, batch_per_device: 32, log_every_iters: 4}";
  const std::string old_names =
      replace(kBase, loop, "loop: {epochs: 2, checkpoint_every_iters: 4, checkpoint_every_secs: 30}") +
      "output: {keep_checkpoints: 1}\nstopping: {keep_best: false}\n";
  testing::internal::CaptureStderr();
  const Experiment old_e = load(old_names);
  const std::string said = testing::internal::GetCapturedStderr();
  const Experiment new_e = load(replace(kBase, loop, "loop: {epochs: 2}") +
                                "checkpoint: {every_iters: 4, every_secs: 30, keep: 1, keep_best: false}\n");
  EXPECT_EQ(old_e.checkpoint.every_iters, 4);
  EXPECT_DOUBLE_EQ(old_e.checkpoint.every_secs, 30);
  EXPECT_EQ(old_e.checkpoint.keep, 1);
  EXPECT_FALSE(old_e.checkpoint.keep_best);
  EXPECT_EQ(old_e.resolved(), new_e.resolved());
  EXPECT_TRUE(contains(said, "exp.yaml:")) << said;
  EXPECT_TRUE(contains(said, ": loop.checkpoint_every_iters is deprecated: read as checkpoint.every_iters")) << said;
  EXPECT_TRUE(contains(said, ": stopping.keep_best is deprecated: read as checkpoint.keep_best")) << said;

  // A --set and a stage under the old name.
  EXPECT_EQ(load(kBase, {"output.keep_checkpoints=7"}).checkpoint.keep, 7);
  const Experiment staged =
      load(kBase + "stages:\n  - {name: a}\n  - {name: b, loop: {epochs: 3, checkpoint_every_iters: 8}}\n");
  ASSERT_EQ(staged.stages.size(), 2u);
  EXPECT_EQ(staged.stages[0].checkpoint.every_iters, 0);
  EXPECT_EQ(staged.stages[1].checkpoint.every_iters, 8);

  const std::string both =
      error_of(replace(kBase, loop, "loop: {checkpoint_every_iters: 4}") + "checkpoint: {every_iters: 8}\n");
  EXPECT_TRUE(contains(both,
                       "loop.checkpoint_every_iters: given twice: under its old name and as "
                       "checkpoint.every_iters"))
      << both;

  // A config recorded before the move: its old keys compare under the new names.
  nlohmann::ordered_json recorded = new_e.resolved();
  recorded["loop"]["checkpoint_every_iters"] = recorded["checkpoint"]["every_iters"];
  recorded["output"]["keep_checkpoints"] = recorded["checkpoint"]["keep"];
  recorded["checkpoint"].erase("every_iters");
  recorded["checkpoint"].erase("keep");
  EXPECT_TRUE(ExperimentSnapshot(new_e).changes_from(recorded).empty());
  recorded["output"]["keep_checkpoints"] = 5;  // and a real change is still one
  const auto changes = ExperimentSnapshot(new_e).changes_from(recorded);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, "checkpoint.keep");
}

TEST(ExperimentConfig, YamlSyntaxErrorNamesFileLineAndColumn) {
  std::string err = error_of("name: x\nnetwork: {plugin: mlp\nloss: {}\n");
  EXPECT_TRUE(contains(err, "exp.yaml:3:")) << err;
  EXPECT_TRUE(contains(err, "YAML syntax error")) << err;
}

TEST(ExperimentConfig, UnknownComponentListsKnownOnesAndSuggests) {
  std::string err = error_of(replace(kBase, "plugin: mlp", "plugin: mpl"));
  EXPECT_TRUE(contains(err, "exp.yaml:6:")) << err;
  EXPECT_TRUE(contains(err, "network.plugin")) << err;
  EXPECT_TRUE(contains(err, "network 'mpl' is not registered")) << err;
  EXPECT_TRUE(contains(err, "known networks: ")) << err;
  EXPECT_TRUE(contains(err, "convnet")) << err;
  EXPECT_TRUE(contains(err, "did you mean 'mlp'?")) << err;
}

TEST(ExperimentConfig, UnknownOptionKeySuggestsClosest) {
  std::string err = error_of(replace(kBase, "hidden_sizes", "hiden_sizes"));
  EXPECT_TRUE(contains(err, "network.hiden_sizes: unknown option for network 'mlp'")) << err;
  EXPECT_TRUE(contains(err, "did you mean 'hidden_sizes'?")) << err;
  EXPECT_TRUE(contains(
      err, "expected one of plugin, pretrained, pretrained_rename, trainable, freeze, memory_format, hidden_sizes"))
      << err;
}

TEST(ExperimentConfig, WrongTypeNamesExpectedAndGot) {
  std::string err = error_of(replace(kBase, "hidden_sizes: [32]", "hidden_sizes: wide"));
  EXPECT_TRUE(contains(err, "network.hidden_sizes: wrong type; expected a list of integers")) << err;
  EXPECT_TRUE(contains(err, "got 'wide'")) << err;
  err = error_of(replace(kBase, "lr: 0.05", "lr: fast"));
  EXPECT_TRUE(contains(err, "optimizer.lr: wrong type; expected a number, got 'fast'")) << err;
  err = error_of(replace(kBase, "epochs: 2", "epochs: 2.5"));
  EXPECT_TRUE(contains(err, "loop.epochs: wrong type; expected an integer, got '2.5'")) << err;
}

TEST(ExperimentConfig, OutOfRangeValueShowsTheRange) {
  std::string err = error_of(replace(kBase, "dropout: 0.1", "dropout: 1.5"));
  EXPECT_TRUE(contains(err, "network.dropout: value out of range; expected between 0.0 and 0.99, got 1.5")) << err;
  err = error_of(replace(kBase, "batch_per_device: 32", "batch_per_device: 0"));
  EXPECT_TRUE(contains(err, "loop.batch_per_device: value out of range; expected at least 1")) << err;
}

TEST(ExperimentConfig, InvalidChoiceListsChoices) {
  std::string err = error_of(replace(kBase, "dropout: 0.1", "activation: relux"));
  EXPECT_TRUE(contains(err, "'relux' is not a valid choice; expected one of relu, tanh, gelu, sigmoid")) << err;
  EXPECT_TRUE(contains(err, "did you mean 'relu'?")) << err;
}

TEST(ExperimentConfig, MissingRequiredKeyIsNamed) {
  std::string err =
      error_of(replace(kBase, "{plugin: mlp, hidden_sizes: [32], dropout: 0.1}", "{plugin: needs_width}"));
  EXPECT_TRUE(contains(err, "missing required option 'width' for network 'needs_width'")) << err;
  EXPECT_TRUE(contains(err, "expected integer, got nothing")) << err;
}

TEST(ExperimentConfig, MissingSectionIsNamed) {
  std::string err = error_of(replace(kBase, "loss: {plugin: cross_entropy}\n", ""));
  EXPECT_TRUE(contains(err, "missing section 'loss'")) << err;
  EXPECT_TRUE(contains(err, "cross_entropy")) << err;
}

TEST(ExperimentConfig, UnknownSectionSuggestsClosest) {
  std::string err = error_of(kBase + "netwrok: {}\n");
  EXPECT_TRUE(contains(err, "unknown section 'netwrok'")) << err;
  EXPECT_TRUE(contains(err, "did you mean 'network'?")) << err;
}

TEST(ExperimentConfig, SetOverridesValuesAndCreatesSections) {
  Experiment e = load(replace(kBase, "loop: {epochs: 2, batch_per_device: 32, log_every_iters: 4}\n", ""),
                      {"optimizer.lr=0.5", "loop.epochs=3", "network.hidden_sizes=[8, 4]", "meters.1.k=[1, 3]"});
  EXPECT_DOUBLE_EQ(option<double>(e.optimizer.options, "lr"), 0.5);
  EXPECT_EQ(e.loop.epochs, 3);
  EXPECT_EQ(option<std::vector<int64_t>>(e.network.options, "hidden_sizes"), (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(option<std::vector<int64_t>>(e.meters[1].options, "k"), (std::vector<int64_t>{1, 3}));
}

TEST(ExperimentConfig, SetOnKeyThatDoesNotExistIsAnError) {
  std::string err = error_of(kBase, {"optimizer.lrr=0.1"});
  EXPECT_TRUE(contains(err, "--set optimizer.lrr=0.1: optimizer.lrr: unknown option for optimizer 'sgd'")) << err;
  EXPECT_TRUE(contains(err, "did you mean 'lr'?")) << err;
  err = error_of(kBase, {"optimiser.lr=0.1"});
  EXPECT_TRUE(contains(err, "--set optimiser.lr=0.1: key 'optimiser' does not exist")) << err;
  EXPECT_TRUE(contains(err, "did you mean 'optimizer'?")) << err;
  err = error_of(kBase, {"meters.5.k=1"});
  EXPECT_TRUE(contains(err, "meters is a list of 2 entries")) << err;
  err = error_of(kBase, {"loop.epochs"});
  EXPECT_TRUE(contains(err, "not KEY=VALUE")) << err;
}

TEST(ExperimentConfig, SetValueIsCheckedLikeFileValues) {
  std::string err = error_of(kBase, {"loop.epochs=many"});
  EXPECT_TRUE(contains(err, "--set loop.epochs=many: loop.epochs: wrong type; expected an integer")) << err;
}

TEST(ExperimentConfig, ResolvedConfigHasEveryDefaultAndPluginVersions) {
  Experiment e = load(kBase);
  nlohmann::ordered_json r = e.resolved();
  EXPECT_EQ(r["network"]["activation"], "relu");
  EXPECT_EQ(r["loop"]["test_every_iters"], 0);
  EXPECT_EQ(r["output"]["dir"], "runs");
  bool found_mlp = false;
  for (const auto& lib : r["resolved_plugins"]) {
    if (lib["name"] == "mlp") found_mlp = lib["version"] == "1.0.0";
    EXPECT_TRUE(std::filesystem::path(lib["path"].get<std::string>()).is_absolute()) << lib.dump();
  }
  EXPECT_TRUE(found_mlp);
  // The resolved config is itself a valid experiment.
  Experiment again = load(to_yaml(r));
  EXPECT_EQ(again.network.options.values().size(), e.network.options.values().size());
  EXPECT_EQ(again.resolved().dump(), r.dump());
}

TEST(ExperimentConfig, ResolvedConfigWritesPluginDirsAbsolute) {
  const std::string dir = test::temp_dir("relative_dirs");
  std::filesystem::create_directories(dir + "/exp");
  const std::string path = dir + "/exp/x.yaml";
  test::write_file(path, kBase + "plugin_dirs: [../plugins]\n");
  Experiment e = validate_experiment(read_experiment(path, {}), registry());
  ASSERT_EQ(e.plugin_dirs.size(), 1u);
  EXPECT_EQ(e.resolved()["plugin_dirs"][0], std::filesystem::absolute(dir + "/plugins").lexically_normal().string());
}

TEST(ExperimentConfig, ToYamlQuotesStringsThatWouldReadAsOtherTypes) {
  nlohmann::ordered_json j = {{"a", "1.5"}, {"b", 1.5}, {"c", "true"}, {"d", "relu"}, {"e", {1, 2}}};
  const std::string text = to_yaml(j);
  EXPECT_TRUE(contains(text, "a: \"1.5\"\nb: 1.5\nc: \"true\"\nd: relu\ne: [1, 2]")) << text;
  const std::string file = test::temp_dir("to_yaml") + "/c.yaml";
  test::write_file(file, text);
  EXPECT_EQ(read_config_file(file).dump(), j.dump());
}

TEST(ExperimentConfig, ReadConfigFileNamesTheFile) {
  const std::string file = test::temp_dir("bad_config") + "/config.yaml";
  test::write_file(file, "a: [1, 2\n");
  try {
    read_config_file(file);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), file + ":")) << e.what();
  }
}

TEST(ExperimentConfig, WhereNamesLineSetOrNearestParent) {
  Experiment e = load(kBase, {"optimizer.lr=0.2"});
  EXPECT_TRUE(contains(e.where("loop.epochs"), "exp.yaml:12:")) << e.where("loop.epochs");
  EXPECT_TRUE(contains(e.where("loop.epochs"), ": loop.epochs")) << e.where("loop.epochs");
  EXPECT_EQ(e.where("optimizer.lr"), "--set optimizer.lr=0.2: optimizer.lr");
  // Absent: the section's position; absent section: the file alone.
  EXPECT_EQ(e.where("loop.iter_size"), e.locations.at("loop") + ": loop.iter_size");
  EXPECT_EQ(e.where("stopping.monitor"), e.path + ": stopping.monitor");
}

TEST(ExperimentConfig, PlotsOfConfigReadsOutputPlots) {
  Experiment e = load(kBase + "output: {plots: [{title: Loss, x: epoch, ys: [train_loss, test_loss]}]}\n");
  auto plots = plots_of_config(e.resolved());
  ASSERT_EQ(plots.size(), 1u);
  EXPECT_EQ(plots[0].title, "Loss");
  EXPECT_EQ(plots[0].x, "epoch");
  EXPECT_EQ(plots[0].ys, (std::vector<std::string>{"train_loss", "test_loss"}));
}

TEST(ExperimentConfig, ComponentOptionsCheckAFlowMapLikeAFile) {
  struct Input {
    std::vector<double> mean;
    int64_t size = 0;
  };
  TypedSchema<Input> typed;
  typed.add("mean", &Input::mean, {0.5}, "mean");
  typed.add("size", &Input::size, 4, "size").min(1);
  const Schema& schema = typed.schema();
  Options o = component_options(schema, {{"size", Value(int64_t{8})}}, "{mean: [0.286]}", "--input-options");
  EXPECT_EQ(option<std::vector<double>>(o, "mean"), std::vector<double>{0.286});
  EXPECT_EQ(option<int64_t>(o, "size"), 8);
  try {
    component_options(schema, {}, "{size: 0}", "--input-options");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "--input-options.size: value out of range; expected at least 1, got 0")) << e.what();
  }
  EXPECT_THROW(component_options(schema, {}, "{sise: 2}", "--input-options"), ConfigError);
  EXPECT_THROW(component_options(schema, {}, "[1, 2]", "--input-options"), ConfigError);
}

// The built-in registry plus a callback with a path option and exclusive bounds.
const Registry& registry_with_paths() {
  static const Registry r = [] {
    Registry reg = registry();
    struct Pathy {
      std::string vocabulary, cache;
      double keep = 0;
    };
    TypedSchema<Pathy> schema;
    schema.add_path("vocabulary", &Pathy::vocabulary, "", "word list");
    schema.add_path("cache", &Pathy::cache, "cache.bin", "cache file");
    schema.add("keep", &Pathy::keep, 0.5, "fraction kept").above(0.0).below(1.0);
    Component c{Kind::callback, "pathy", "a callback with a path option", schema.schema(), nullptr, {}};
    auto library = std::make_shared<LibraryInfo>();
    library->path = "/test/libpathy.so";
    library->name = "pathy";
    c.library = library;
    reg.add_library(library, {c});
    return reg;
  }();
  return r;
}

TEST(ExperimentConfig, PathOptionsResolveAgainstTheExperimentFolder) {
  const std::string dir = test::temp_dir("paths");
  std::filesystem::create_directories(dir + "/exp");
  const std::string path = dir + "/exp/x.yaml";
  test::write_file(path, kBase + "callbacks: [{plugin: pathy, vocabulary: ../data/words.txt}]\n");
  Experiment e = validate_experiment(read_experiment(path, {}), registry_with_paths());
  const auto& o = e.callbacks.at(0).options;
  EXPECT_EQ(option<std::string>(o, "vocabulary"),
            std::filesystem::absolute(dir + "/data/words.txt").lexically_normal().string());
  EXPECT_EQ(option<std::string>(o, "cache"),
            std::filesystem::absolute(dir + "/exp/cache.bin").lexically_normal().string());
  // Given with --set: the same rule, relative to the experiment file's folder
  // (not the working directory), so that a resume started from another
  // folder resolves what the run's config.yaml holds.
  Experiment set = validate_experiment(
      read_experiment(path, {"callbacks.0.vocabulary=w.txt", "network.pretrained=../models/init.pt"}),
      registry_with_paths());
  EXPECT_EQ(option<std::string>(set.callbacks.at(0).options, "vocabulary"),
            std::filesystem::absolute(dir + "/exp/w.txt").lexically_normal().string());
  EXPECT_EQ(set.network.pretrained, std::filesystem::absolute(dir + "/models/init.pt").lexically_normal().string());
  // An empty path stays empty.
  test::write_file(path, kBase + "callbacks: [{plugin: pathy, vocabulary: '', cache: ''}]\n");
  Experiment empty = validate_experiment(read_experiment(path, {}), registry_with_paths());
  EXPECT_EQ(option<std::string>(empty.callbacks.at(0).options, "vocabulary"), "");
  EXPECT_EQ(option<std::string>(empty.callbacks.at(0).options, "cache"), "");
}

TEST(ExperimentConfig, ExclusiveBoundsRefuseTheBoundItself) {
  const std::string path = test::temp_dir("bounds") + "/x.yaml";
  test::write_file(path, kBase + "callbacks: [{plugin: pathy, keep: 1.0}]\n");
  try {
    validate_experiment(read_experiment(path, {}), registry_with_paths());
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "callbacks[0].keep: value out of range; expected above 0.0 and below 1.0, got 1.0"))
        << e.what();
  }
}

TEST(ExperimentConfig, ExtraSectionIsFlattenedForComponents) {
  Experiment e = load(kBase + "extra:\n  my_net: {scale: 2.5, tags: [a, b]}\n");
  EXPECT_EQ(e.extra.at("my_net.scale"), "2.5");
  EXPECT_EQ(e.extra.at("my_net.tags.1"), "b");
  Extra extra(e.extra);
  EXPECT_DOUBLE_EQ(extra.get_number("my_net.scale", 0), 2.5);
  EXPECT_THROW(extra.get_number("my_net.tags.0", 0), ConfigError);
}

// The YAML is checked as it is read (host/config/yaml_reading.cpp), before
// any section is looked at: these hold for every file the host reads.
TEST(YamlReading, DuplicateKeysAreRefusedNamingBothLines) {
  const std::string e = error_of(kBase + "extra:\n  a: 1\n  a: 3\n");
  EXPECT_TRUE(contains(e, "extra.a: duplicate key")) << e;
  EXPECT_TRUE(contains(e, "first at line")) << e;
  // A whole section given twice, and a key twice in a flow map.
  EXPECT_TRUE(contains(error_of(kBase + "loop: {epochs: 3}\n"), "loop: duplicate key"));
  EXPECT_TRUE(contains(error_of(kBase, {"network={plugin: mlp, dropout: 0.1, dropout: 0.2}"}), "duplicate key"));
}

TEST(YamlReading, AliasExpansionIsBounded) {
  std::string laughs = kBase + "extra:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  std::string prev = "a";
  for (std::string k : {"b", "c", "d", "e", "f"}) {
    laughs += "  " + k + ": &" + k + " [";
    for (int i = 0; i < 10; ++i) laughs += (i ? ", *" : "*") + prev;
    laughs += "]\n";
    prev = k;
  }
  const std::string e = error_of(laughs);  // 10^6 values if expanded
  EXPECT_TRUE(contains(e, "expands to more than 100000 values")) << e;
  // Aliases used a few times are fine.
  EXPECT_EQ(error_of(kBase + "extra:\n  a: &a [1, 2]\n  b: *a\n"), "");
}

TEST(YamlReading, OverflowingNumbersAreOutOfRangeNotInfinity) {
  EXPECT_TRUE(contains(error_of(kBase, {"optimizer.lr=1e400"}), "number out of range"));
  EXPECT_TRUE(contains(error_of(kBase, {"loop.epochs=2305843009213693952"}), "expected between 0 and 1000000"));
  EXPECT_TRUE(contains(error_of(kBase, {"loop.epochs=99999999999999999999"}), "integer out of range"));
  EXPECT_EQ(error_of(kBase, {"optimizer.lr=1e-300"}), "");
}

TEST(YamlReading, TabsBinaryFoldersAndDeepNestingAreNamed) {
  EXPECT_TRUE(contains(error_of(kBase + "extra:\n\tx: 1\n"), "a tab in the indentation"));
  EXPECT_TRUE(contains(error_of(kBase + "extra: {x: " + std::string(40, '[') + std::string(40, ']') + "}\n"),
                       "nested deeper than 32 levels"));
  std::string block = kBase + "extra:\n";
  for (int d = 1; d < 40; ++d) block += std::string(2 * d, ' ') + "k" + std::to_string(d) + ":\n";
  block += std::string(80, ' ') + "v: 1\n";
  EXPECT_TRUE(contains(error_of(block), "nested deeper than 32 levels"));
  EXPECT_TRUE(contains(error_of(kBase + "name: \xff\xfe\n"), "not a text file (byte 0xff)"));
  try {
    read_experiment(test::temp_dir("a-folder"), {});
    ADD_FAILURE() << "a folder was read as an experiment";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "is a folder")) << e.what();
  }
  // Tabs after the indentation (inside values, before comments) are text, not indentation.
  EXPECT_EQ(error_of(kBase + "extra: {note: \"a\tb\"}\t# comment\n"), "");
}

}  // namespace
}  // namespace trainyard::host
