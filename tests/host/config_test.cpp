// Validation of experiment files against the host's and the plugins' schemas.
#include <gtest/gtest.h>

#include "config/experiment.h"
#include "plugins/loader.h"
#include "support/support.h"
#include "trainyard/error.h"

namespace trainyard::host {
namespace {

using test::contains;

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
  EXPECT_EQ(e.loop.test_every_iters, 0);  // default
  EXPECT_EQ(e.network.options.get<std::string>("activation"), "relu");  // plugin default
  EXPECT_EQ(e.network.options.get<std::vector<int64_t>>("hidden_sizes"), std::vector<int64_t>{32});
  EXPECT_DOUBLE_EQ(e.optimizer.options.get<double>("lr"), 0.05);
  ASSERT_EQ(e.meters.size(), 2u);
  EXPECT_EQ(e.meters[1].options.get<std::vector<int64_t>>("k"), (std::vector<int64_t>{1, 2}));
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
  EXPECT_TRUE(contains(err, "expected one of plugin, pretrained, trainable, freeze, memory_format, hidden_sizes")) << err;
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
  std::string err = error_of(replace(kBase, "{plugin: mlp, hidden_sizes: [32], dropout: 0.1}", "{plugin: needs_width}"));
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
  EXPECT_DOUBLE_EQ(e.optimizer.options.get<double>("lr"), 0.5);
  EXPECT_EQ(e.loop.epochs, 3);
  EXPECT_EQ(e.network.options.get<std::vector<int64_t>>("hidden_sizes"), (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(e.meters[1].options.get<std::vector<int64_t>>("k"), (std::vector<int64_t>{1, 3}));
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
  YAML::Node r = e.resolved();
  EXPECT_EQ(r["network"]["activation"].as<std::string>(), "relu");
  EXPECT_EQ(r["loop"]["test_every_iters"].as<int>(), 0);
  EXPECT_EQ(r["output"]["dir"].as<std::string>(), "runs");
  bool found_mlp = false;
  for (const auto& lib : r["resolved_plugins"])
    if (lib["name"].as<std::string>() == "mlp") found_mlp = lib["version"].as<std::string>() == "1.0.0";
  EXPECT_TRUE(found_mlp);
  // The resolved config is itself a valid experiment.
  YAML::Emitter out;
  out << r;
  Experiment again = load(out.c_str());
  EXPECT_EQ(again.network.options.values().size(), e.network.options.values().size());
}

TEST(ExperimentConfig, ExtraSectionIsFlattenedForComponents) {
  Experiment e = load(kBase + "extra:\n  my_net: {scale: 2.5, tags: [a, b]}\n");
  EXPECT_EQ(e.extra.at("my_net.scale"), "2.5");
  EXPECT_EQ(e.extra.at("my_net.tags.1"), "b");
  Extra extra(e.extra);
  EXPECT_DOUBLE_EQ(extra.get_number("my_net.scale", 0), 2.5);
  EXPECT_THROW(extra.get_number("my_net.tags.0", 0), ConfigError);
}

}  // namespace
}  // namespace trainyard::host
