// Built-in networks loaded from their plugin libraries: ResNet shapes and
// published parameter counts, batch norm settings, TorchScript networks.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/serialize/input-archive.h>

#include "plugins/library_loader.h"
#include "support/support.h"
#include "trainyard/error.h"
#include "trainyard/network.h"

namespace trainyard::host {
namespace {

const Registry& builtins() { return test::builtin_registry(); }

// A network built as the host builds it: schema defaults plus `set`.
std::shared_ptr<Network> build(const std::string& plugin, std::map<std::string, Value> set, std::vector<int64_t> shape,
                               int64_t classes) {
  const Component& c = builtins().get(Kind::network, plugin);
  std::map<std::string, Value> values;
  for (const auto& spec : c.schema.specs())
    if (spec.default_value) values[spec.key] = *spec.default_value;
  for (auto& [k, v] : set) values[k] = v;
  Context context;
  context.dataset.sample_shape = std::move(shape);
  context.dataset.num_classes = classes;
  return std::get<Factory<Network>>(c.factory)(Options(values), context);
}

int64_t count(Network& n) {
  int64_t total = 0;
  for (const auto& p : n.parameters()) total += p.numel();
  return total;
}

TEST(ResNet, ImageNetDepthsHaveThePublishedParameterCounts) {
  // torchvision's resnet18/34/50 with 1000 classes (He et al. table 1 models).
  EXPECT_EQ(count(*build("resnet", {{"depth", int64_t{18}}}, {3, 224, 224}, 1000)), 11689512);
  EXPECT_EQ(count(*build("resnet", {{"depth", int64_t{34}}}, {3, 224, 224}, 1000)), 21797672);
  EXPECT_EQ(count(*build("resnet", {{"depth", int64_t{50}}}, {3, 224, 224}, 1000)), 25557032);
}

TEST(ResNet, CifarDepthsHaveThePaperParameterCounts) {
  // He et al. section 4.2: ResNet-20 0.27M, ResNet-56 0.85M, ResNet-110 1.7M (10 classes).
  EXPECT_EQ(count(*build("resnet", {{"depth", int64_t{20}}}, {3, 32, 32}, 10)), 269722);
  EXPECT_NEAR(count(*build("resnet", {{"depth", int64_t{56}}}, {3, 32, 32}, 10)) / 1e6, 0.85, 0.01);
  EXPECT_NEAR(count(*build("resnet", {{"depth", int64_t{110}}}, {3, 32, 32}, 10)) / 1e6, 1.7, 0.05);
}

TEST(ResNet, ForwardGivesOneRowOfLogitsPerImageAndBackwardReachesEveryParameter) {
  auto net = build("resnet", {{"depth", int64_t{20}}}, {1, 28, 28}, 10);
  Batch b{at::randn({4, 1, 28, 28}), at::zeros({4}, at::kLong), {}};
  at::Tensor out = net->forward(b);
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{4, 10}));
  out.sum().backward();
  for (const auto& p : net->named_parameters()) EXPECT_TRUE(p.value().grad().defined()) << p.key();
  auto small = build("resnet", {{"depth", int64_t{18}}, {"small_input", true}}, {1, 28, 28}, 10);
  EXPECT_EQ(small->forward(b).sizes(), (at::IntArrayRef{4, 10}));
  EXPECT_TRUE(small->named_parameters().contains("layer2.0.downsample.0.weight"));
}

TEST(EmbeddingHeads, EveryBuiltInNetworkGivesUnitEmbeddingsAndSaysWhatItOutputs) {
  const Batch b{at::randn({4, 1, 28, 28}), at::zeros({4}, at::kLong), {}};
  for (const std::string plugin : {"mlp", "convnet", "resnet"}) {
    auto classifier = build(plugin, {}, {1, 28, 28}, 10);
    EXPECT_EQ(classifier->forward(b).sizes(), (at::IntArrayRef{4, 10})) << plugin;
    auto* says = dynamic_cast<NetworkOutputs*>(classifier.get());
    ASSERT_NE(says, nullptr) << plugin;
    EXPECT_EQ(says->output_kind(), OutputKind::class_scores) << plugin;
    auto embedder = build(plugin, {{"embedding_size", int64_t{24}}, {"normalize", true}}, {1, 28, 28}, 10);
    embedder->eval();
    const at::Tensor e = embedder->forward(b);
    EXPECT_EQ(e.sizes(), (at::IntArrayRef{4, 24})) << plugin;
    EXPECT_LT((e.norm(2, 1) - 1).abs().max().item<double>(), 1e-5) << plugin;
    EXPECT_EQ(dynamic_cast<NetworkOutputs*>(embedder.get())->output_kind(), OutputKind::embeddings) << plugin;
    // Unnormalized, the rows keep their lengths.
    auto raw = build(plugin, {{"embedding_size", int64_t{24}}}, {1, 28, 28}, 10);
    raw->eval();
    EXPECT_GT((raw->forward(b).norm(2, 1) - 1).abs().max().item<double>(), 1e-3) << plugin;
  }
}

TEST(ResNet, BatchNormSettingsComeFromTheOptions) {
  auto net =
      build("resnet", {{"depth", int64_t{20}}, {"bn_epsilon", 1e-3}, {"bn_momentum", 0.01}, {"bn_init_gamma", 0.0}},
            {1, 28, 28}, 10);
  auto modules = net->named_modules();
  auto* bn = modules["layer1.0.bn1"]->as<torch::nn::BatchNorm2dImpl>();
  ASSERT_NE(bn, nullptr);
  EXPECT_DOUBLE_EQ(bn->options.eps(), 1e-3);
  EXPECT_DOUBLE_EQ(bn->options.momentum().value(), 0.01);
  auto params = net->named_parameters();
  // Zero-gamma init on the last batch norm of each block only.
  EXPECT_EQ(params["layer1.0.bn2.weight"].abs().sum().item<double>(), 0.0);
  EXPECT_EQ(params["layer3.2.bn2.weight"].abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(params["layer1.0.bn1.weight"].eq(1).all().item<bool>());
  EXPECT_TRUE(params["bn1.weight"].eq(1).all().item<bool>());
  // With zero gamma every block starts as the identity (plus ReLU) on its input.
  net->eval();
  EXPECT_EQ(net->forward({at::randn({2, 1, 28, 28}), at::zeros({2}, at::kLong), {}}).sizes(), (at::IntArrayRef{2, 10}));

  auto conv = build("convnet", {{"bn_epsilon", 1e-4}, {"bn_momentum", 0.2}}, {1, 28, 28}, 10);
  auto* cbn = conv->named_modules()["features.1"]->as<torch::nn::BatchNorm2dImpl>();
  ASSERT_NE(cbn, nullptr);
  EXPECT_DOUBLE_EQ(cbn->options.eps(), 1e-4);
  EXPECT_DOUBLE_EQ(cbn->options.momentum().value(), 0.2);
}

TEST(ResNet, UnknownDepthIsAConfigErrorListingTheDepths) {
  try {
    build("resnet", {{"depth", int64_t{19}}}, {1, 28, 28}, 10);
    FAIL() << "depth 19 accepted";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(test::contains(e.what(), "18, 34, 50, 101, 152")) << e.what();
  }
}

}  // namespace
}  // namespace trainyard::host

namespace trainyard::host {
namespace {

// The Python of the torch environment the build used (scripts/torch-env.sh):
// the exported model then comes from the same PyTorch as the LibTorch that loads it.
std::string python_with_torch() {
  const std::string python = ::trainyard::test::python();
  if (!python.empty() && test::run_command(python + " -c 'import torch'").exit_code == 0) return python;
  return "";
}

std::vector<double> train_losses(const std::string& run_dir) {
  std::vector<double> out;
  for (const auto& line : test::read_lines(run_dir + "/metrics.jsonl")) {
    auto at = line.find("\"train_loss\": ");
    if (at != std::string::npos && test::contains(line, "\"phase\": \"train\""))
      out.push_back(std::stod(line.substr(at + 14)));
  }
  return out;
}

TEST(Unet, ADecoderStrideLeavesOutTheFullSizeLevelsAndUpsamplesTheScores) {
  // depth 3, width 4: levels of 4, 8, 16 channels, a 32-channel bottleneck
  // at stride 8. decoder_stride 4 keeps the decoder's deepest level (stride
  // 8 to 4), so the head takes its 16 channels, not 4, and the weights of
  // the levels at strides 2 and 1 are gone; the scores come back at the
  // input's size, any size the depth halves.
  auto full = build("unet", {{"depth", int64_t{3}}, {"width", int64_t{4}}}, {3, 32, 32}, 5);
  auto strided =
      build("unet", {{"depth", int64_t{3}}, {"width", int64_t{4}}, {"decoder_stride", int64_t{4}}}, {3, 32, 32}, 5);
  const auto head = [](Network& n) { return n.named_parameters()["classes.weight"].sizes().vec(); };
  EXPECT_EQ(head(*full), (std::vector<int64_t>{5, 4, 1, 1}));
  EXPECT_EQ(head(*strided), (std::vector<int64_t>{5, 16, 1, 1}));
  // Each left-out level: a 2x2 transposed convolution (with bias) and two 3x3
  // convolutions (no bias) with batch norm; the head has 12 more inputs.
  const int64_t left_out = (16 * 8 * 4 + 8) + (16 * 8 * 9 + 8 * 8 * 9 + 2 * 8 * 2) +  // stride 2: 16 -> 8
                           (8 * 4 * 4 + 4) + (8 * 4 * 9 + 4 * 4 * 9 + 2 * 4 * 2) -    // stride 1: 8 -> 4
                           5 * 12;
  EXPECT_EQ(count(*full) - count(*strided), left_out);
  Batch b{at::randn({2, 3, 40, 48}), at::Tensor(), {}};
  at::Tensor out = strided->forward(b);
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{2, 5, 40, 48}));
  out.sum().backward();
  for (const auto& p : strided->named_parameters()) EXPECT_TRUE(p.value().grad().defined()) << p.key();
  // Only strides the decoder passes through: a power of 2 up to 2^depth.
  for (int64_t bad : {3, 16}) {
    try {
      build("unet", {{"depth", int64_t{3}}, {"decoder_stride", bad}}, {3, 32, 32}, 5);
      ADD_FAILURE() << bad;
    } catch (const ConfigError& e) {
      EXPECT_TRUE(test::contains(e.what(), "network.decoder_stride: " + std::to_string(bad))) << e.what();
      EXPECT_TRUE(test::contains(e.what(), "a power of 2 from 1 to 2^depth = 8")) << e.what();
    }
  }
}

TEST(TorchScript, ANetworkExportedFromPythonTrainsChecksPointsAndResumes) {
  const std::string python = python_with_torch();
  ASSERT_FALSE(python.empty()) << "no Python with torch at '" << ::trainyard::test::python()
                               << "' (scripts/install-deps.sh installs it): cannot export a model";
  const std::string dir = test::temp_dir("script");
  // torch.jit.script reads the class's source, so the exporter is a file.
  test::write_file(dir + "/export.py",
                   "import sys, torch\n"
                   "class Net(torch.nn.Module):\n"
                   "    def __init__(self):\n"
                   "        super().__init__()\n"
                   "        self.features = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1),\n"
                   "                                            torch.nn.BatchNorm2d(8), torch.nn.ReLU())\n"
                   "        self.fc = torch.nn.Linear(8 * 4 * 4, 4)\n"
                   "    def forward(self, x):\n"
                   "        return self.fc(self.features(x).flatten(1))\n"
                   "torch.manual_seed(0)\n"
                   "torch.jit.script(Net()).save(sys.argv[1])\n");
  auto exported = test::run_command(python + " " + dir + "/export.py " + dir + "/net.pt");
  ASSERT_EQ(exported.exit_code, 0) << exported.err;

  const std::string exp = dir + "/script.yaml", out = dir + "/runs";
  std::string yaml = test::synthetic_experiment("script");
  yaml.replace(yaml.find("network: {plugin: mlp, hidden_sizes: [32], dropout: 0.1}"), 56,
               "network: {plugin: torchscript, path: " + dir + "/net.pt}");
  test::write_file(exp, yaml);

  // Python's parameter names, so groups and freezing can name them.
  auto v = test::trainyard("validate " + exp);
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_TRUE(test::contains(v.out, "features.1.weight")) << v.out;

  auto whole = test::trainyard("run " + exp + " --output-dir " + out + "/whole --set loop.epochs=3");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  auto losses = train_losses(out + "/whole/script");
  ASSERT_GE(losses.size(), 4u);
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << "the loss did not go down";

  // Interrupted after one epoch and resumed: the same weights, batch norm statistics included.
  auto first = test::trainyard("run " + exp + " --output-dir " + out + "/split --set loop.epochs=1");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto rest = test::trainyard("run " + exp + " --output-dir " + out + "/split --set loop.epochs=3");
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_EQ(test::compare_checkpoint_networks(out + "/whole/script/checkpoints/ckpt-e0003-i00000048.pt",
                                              out + "/split/script/checkpoints/ckpt-e0003-i00000048.pt"),
            "");

  // A frozen script submodule keeps its weights and its batch norm statistics.
  auto frozen = test::trainyard("run " + exp + " --output-dir " + out +
                                "/frozen --set loop.epochs=1 --set 'network.freeze=[features]'");
  ASSERT_EQ(frozen.exit_code, 0) << frozen.err;
  auto initial =
      test::trainyard("run " + exp + " --output-dir " + out + "/initial --set loop.epochs=1 --set optimizer.lr=0");
  ASSERT_EQ(initial.exit_code, 0) << initial.err;
  const std::string frozen_ckpt = out + "/frozen/script/checkpoints/ckpt-e0001-i00000016.pt";
  const std::string initial_ckpt = out + "/initial/script/checkpoints/ckpt-e0001-i00000016.pt";
  EXPECT_TRUE(test::checkpoint_tensor(frozen_ckpt, "features.0.weight")
                  .equal(test::checkpoint_tensor(initial_ckpt, "features.0.weight")));
  // Batch norm statistics: still the exported zeros when frozen, moved by training (even at lr 0) otherwise.
  EXPECT_EQ(test::checkpoint_tensor(frozen_ckpt, "features.1.running_mean").abs().sum().item<double>(), 0.0);
  EXPECT_GT(test::checkpoint_tensor(initial_ckpt, "features.1.running_mean").abs().sum().item<double>(), 0.0);
  at::Tensor fa = test::checkpoint_tensor(frozen_ckpt, "fc.weight"),
             fb = test::checkpoint_tensor(initial_ckpt, "fc.weight");
  EXPECT_FALSE(fa.equal(fb)) << "the classifier should have trained";
}

TEST(TorchScript, AMissingFileIsAConfigErrorNamingIt) {
  const std::string exp = test::temp_dir("missing") + "/m.yaml";
  std::string yaml = test::synthetic_experiment("m");
  yaml.replace(yaml.find("network: {plugin: mlp, hidden_sizes: [32], dropout: 0.1}"), 56,
               "network: {plugin: torchscript, path: /nonexistent/net.pt}");
  test::write_file(exp, yaml);
  auto r = test::trainyard("run " + exp + " --output-dir " + test::temp_dir("out"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(test::contains(r.err, "/nonexistent/net.pt")) << r.err;
}

}  // namespace
}  // namespace trainyard::host
