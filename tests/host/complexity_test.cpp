// FLOPs and activation bytes per sample (train/complexity.h) against
// PyTorch's own counter, torch.utils.flop_counter.FlopCounterMode, run on the
// Python twins of the recipes' networks (scripts/bench/recipe_reference.py),
// and against hand counts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "support/support.h"

namespace trainyard::test {
namespace {

// The synthetic experiment on 28x28 images of 10 classes with `network`.
std::string experiment(const std::string& name, const std::string& network) {
  std::string yaml = synthetic_experiment(name);
  auto replace = [&](const std::string& from, const std::string& to) {
    yaml.replace(yaml.find(from), from.size(), to);
  };
  replace("network: {plugin: mlp, hidden_sizes: [32], dropout: 0.1}", "network: " + network);
  for (int i = 0; i < 2; ++i) replace("num_classes: 4, shape: [1, 4, 4]", "num_classes: 10, shape: [1, 28, 28]");
  replace("size: 512", "size: 64");
  const std::string path = temp_dir("exp-" + name) + "/" + name + ".yaml";
  write_file(path, yaml);
  return path;
}

// The total `trainyard validate` prints: "total: ... forward per sample (N)".
int64_t validated_flops(const std::string& exp, std::string& out) {
  const auto r = trainyard("validate " + exp);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  out = r.out;
  std::smatch m;
  if (!std::regex_search(r.out, m, std::regex(R"(total: .* forward per sample \((\d+)\))"))) return -1;
  return std::stoll(m[1]);
}

// FlopCounterMode's total for the twin `builder` of recipe_reference.py on one 28x28 image.
int64_t torch_flops(const std::string& builder, const std::string& recipe) {
  const std::string script = temp_dir("flops-" + builder) + "/count.py";
  write_file(script,
             "import sys, torch\n"
             "sys.path.insert(0, sys.argv[1])\n"
             "import recipe_reference as r\n"
             "from torch.utils.flop_counter import FlopCounterMode\n"
             "net = r." +
                 builder + "(r.RECIPES['" + recipe +
                 "']).eval()\n"
                 "with torch.no_grad(), FlopCounterMode(display=False) as counter:\n"
                 "    net(torch.zeros(1, 1, 28, 28))\n"
                 "print(counter.get_total_flops())\n");
  const auto r = run_command(::trainyard::test::python() + " " + script + " " + source_dir() + "/scripts/bench");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? std::stoll(r.out) : -2;
}

TEST(NetworkCost, TheRecipesMlpAndResNet20CountAsPyTorchsFlopCounter) {
  std::string out;
  const std::string mlp = experiment("mlp", "{plugin: mlp, hidden_sizes: [512, 256], dropout: 0.2}");
  const int64_t mlp_flops = validated_flops(mlp, out);
  // By hand: 2 x (784 x 512 + 512 x 256 + 256 x 10) = 1,070,080.
  EXPECT_EQ(mlp_flops, 2 * (784 * 512 + 512 * 256 + 256 * 10)) << out;
  EXPECT_EQ(mlp_flops, torch_flops("mlp", "mlp"));
  // The weighted layers' outputs: 512 + 256 + 10 floats.
  EXPECT_TRUE(contains(out, "activations of the weighted layers: 3.11 kB per sample")) << out;
  // Per top-level module, within 80 columns.
  EXPECT_TRUE(contains(out, "layers Sequential")) << out;
  for (const auto& line : nonempty_lines(out))
    if (contains(line, "FLOPs") || contains(line, "activations")) EXPECT_LE(line.size(), 80u) << line;

  const std::string resnet = experiment("resnet", "{plugin: resnet, depth: 20}");
  const int64_t resnet_flops = validated_flops(resnet, out);
  EXPECT_GT(resnet_flops, 50'000'000) << out;  // about 41 M multiply-adds at 32 px, 31 M at 28 px
  EXPECT_EQ(resnet_flops, torch_flops("resnet20", "resnet")) << out;

  // The dry run shows each layer's share; a run records the totals in provenance.json.
  const auto dry = trainyard("run " + mlp + " --dry-run");
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_TRUE(contains(dry.out, "-> [32, 512]; 803 kFLOPs, 2.05 kB")) << dry.out;  // 2 x 784 x 512; 512 floats
  const std::string dir = temp_dir("cost-run");
  const auto run = trainyard("run " + mlp + " --output-dir " + dir + " --set loop.epochs=1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto provenance = nlohmann::json::parse(read_file(dir + "/mlp/provenance.json"));
  EXPECT_EQ(provenance["network"]["forward_flops_per_sample"].get<int64_t>(), mlp_flops);
  EXPECT_EQ(provenance["network"]["activation_bytes_per_sample"].get<int64_t>(), (512 + 256 + 10) * 4);
  EXPECT_EQ(provenance["network"]["parameters"].get<int64_t>(), 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
}

}  // namespace
}  // namespace trainyard::test
