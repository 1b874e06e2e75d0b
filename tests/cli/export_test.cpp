// trainyard export, read by Python's torch: a state_dict loads strictly into
// the equivalent nn.Module, a TorchScript network comes back as TorchScript,
// and either gives eval's test accuracy on the same images.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "support/support.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

// Fashion-MNIST's first 2000 test images, normalized as the fashion_mnist
// dataset does; the model is loaded by the caller's Python text.
std::string accuracy_script(const std::string& load_model) {
  return "import gzip, sys, numpy as np, torch\n"
         "d = '/usr/share/datasets/fashion-mnist/'\n"
         "x = np.frombuffer(gzip.open(d + 't10k-images-idx3-ubyte.gz').read(), np.uint8, offset=16)\n"
         "y = np.frombuffer(gzip.open(d + 't10k-labels-idx1-ubyte.gz').read(), np.uint8, offset=8)\n"
         "x = torch.tensor(x[:2000 * 784].reshape(2000, 1, 28, 28), dtype=torch.float32) / 255.0\n"
         "x = (x - 0.2860) / 0.3530\n"
         "y = torch.tensor(y[:2000], dtype=torch.int64)\n" +
         load_model +
         "model.eval()\n"
         "with torch.no_grad():\n"
         "    print('accuracy %.6f' % (model(x).argmax(1) == y).double().mean().item())\n";
}

double eval_top1(const std::string& args, const std::string& json) {
  auto r = trainyard("eval " + args + " --output " + json);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return YAML::LoadFile(json)["values"]["test_accuracy_top1"].as<double>();
}

std::string python_accuracy(const std::string& dir, const std::string& script) {
  write_file(dir + "/check.py", script);
  auto r = run_command(::trainyard::test::python() + " " + dir + "/check.py");
  return r.exit_code == 0 ? r.out : "python failed: " + r.err;
}

std::string accuracy_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "accuracy %.6f", v);
  return buf;
}

// One `error:` line and exit 2, for an --output export cannot or must not write.
void expect_export_refused(const std::string& run, const std::string& output, const std::string& expected) {
  auto r = trainyard("export " + run + " --format state_dict --output " + output);
  EXPECT_EQ(r.exit_code, 2) << output << ": " << r.err;
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << output << ": " << r.err;
  EXPECT_EQ(r.err.rfind("error: command line: --output " + output + ": ", 0), 0u) << r.err;
  EXPECT_TRUE(contains(r.err, expected)) << "expected '" << expected << "' in: " << r.err;
}

TEST(Export, AnOutputThatCannotOrMustNotBeWrittenIsOneErrorLine) {
  const std::string dir = temp_dir("export-targets"), exp = dir + "/ex.yaml", run = dir + "/runs/ex";
  write_file(exp, synthetic_experiment("ex"));
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + dir + "/runs --set loop.epochs=1").exit_code, 0);
  std::string checkpoint;
  for (const auto& f : fs::directory_iterator(run + "/checkpoints"))
    if (f.path().extension() == ".pt") checkpoint = f.path().string();
  ASSERT_FALSE(checkpoint.empty());
  const std::string config = read_file(run + "/config.yaml"), provenance = read_file(run + "/provenance.json"),
                    weights = read_file(checkpoint);

  // Into a folder, into a missing folder, onto a write-protected file (was exit 1 or a replaced file).
  fs::create_directories(dir + "/folder");
  expect_export_refused(run, dir + "/folder", "is a folder; expected the path of a file to write");
  expect_export_refused(run, dir + "/folder/", "is a folder");
  expect_export_refused(run, dir + "/missing/m.pt", "the folder " + dir + "/missing does not exist");
  write_file(dir + "/locked.pt", "keep");
  fs::permissions(dir + "/locked.pt", fs::perms(0444));
  expect_export_refused(run, dir + "/locked.pt", "the file is write-protected (mode 0444)");
  EXPECT_EQ(read_file(dir + "/locked.pt"), "keep");
  // An immutable file (chattr +i): refused before any work, exit 2 naming it (was exit 1 after the export).
  write_file(dir + "/immutable.pt", "keep");
  if (run_command("chattr +i " + dir + "/immutable.pt").exit_code == 0) {
    expect_export_refused(run, dir + "/immutable.pt", "the file is immutable (chattr +i)");
    run_command("chattr -i " + dir + "/immutable.pt");
    EXPECT_EQ(read_file(dir + "/immutable.pt"), "keep");
  }
  // A write that fails once the export is under way (a full disk: a 16 KB
  // tmpfs in a mount namespace of its own): exit 2 naming the path, nothing left there.
  if (::geteuid() == 0) {
    fs::create_directories(dir + "/full");
    const std::string full = "unshare -m sh -c 'mount -t tmpfs -o size=16k tmpfs " + dir + "/full";
    if (run_command(full + "'").exit_code == 0) {
      // Filled first, so that the first block of the file fails.
      auto r = run_command(full + " && { head -c 65536 /dev/zero >" + dir + "/full/filler 2>/dev/null; " +
                           trainyard_binary() + " export " + run + " --format state_dict --output " + dir +
                           "/full/m.pt; echo EXIT=$?; ls -A " + dir + "/full; }'");
      EXPECT_TRUE(contains(r.out, "EXIT=2")) << r.out << r.err;
      EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
      EXPECT_TRUE(contains(r.err, "error: command line: --output " + dir + "/full/m.pt: cannot write it (")) << r.err;
      EXPECT_TRUE(contains(r.err, "No space left on device")) << r.err;
      EXPECT_EQ(nonempty_lines(r.out).size(), 2u) << "left behind: " << r.out;  // EXIT=2 and the filler alone
    }
  }
  // Never a FIFO or a link replaced by a regular file (was exit 0).
  ASSERT_EQ(run_command("mkfifo " + dir + "/fifo").exit_code, 0);
  expect_export_refused(run, dir + "/fifo", "is a FIFO, not a regular file");
  EXPECT_TRUE(fs::is_fifo(dir + "/fifo"));
  fs::create_symlink(dir + "/locked.pt", dir + "/link.pt");
  expect_export_refused(run, dir + "/link.pt", "is a symbolic link, not a regular file");
  EXPECT_TRUE(fs::is_symlink(dir + "/link.pt"));
  // Never the run's own inputs (was exit 0, and the next resume was refused).
  expect_export_refused(run, checkpoint, "would replace " + checkpoint);
  expect_export_refused(run, run + "/config.yaml", "would replace " + run + "/config.yaml, the run's own config.yaml");
  expect_export_refused(run, run + "/provenance.json", "the run's own provenance.json");
  auto own = trainyard("export " + exp + " --output-dir " + dir + "/runs --output " + exp);  // the experiment itself
  EXPECT_EQ(own.exit_code, 2) << own.err;
  EXPECT_TRUE(contains(own.err, "error: command line: --output " + exp + ": would replace " + exp)) << own.err;
  EXPECT_EQ(nonempty_lines(own.err).size(), 1u) << own.err;
  EXPECT_EQ(read_file(run + "/config.yaml"), config);
  EXPECT_EQ(read_file(run + "/provenance.json"), provenance);
  EXPECT_EQ(read_file(checkpoint), weights);
  // A file of the user's beside them is fine, written again too; no temporary file is left.
  for (int i = 0; i < 2; ++i) {
    auto r = trainyard("export " + run + " --format state_dict --output " + run + "/model.pt");
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  for (const auto& f : fs::directory_iterator(run))
    EXPECT_FALSE(contains(f.path().filename().string(), ".tmp-")) << f.path();
  auto resumed = trainyard("run " + exp + " --output-dir " + dir + "/runs --set loop.epochs=2");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
}

TEST(Export, AStateDictLoadsIntoTheEquivalentModuleAndGivesEvalsAccuracy) {
  const std::string dir = temp_dir("state-dict"), exp = source_dir() + "/experiments/fashion_mnist_mlp.yaml";
  const std::string small =
      " --set dataset.train.limit=4000 --set dataset.test.limit=2000 --set loop.epochs=1"
      " --output-dir " +
      dir + "/runs";
  ASSERT_EQ(trainyard("run " + exp + small).exit_code, 0);
  // From the run directory alone.
  auto r = trainyard("export " + dir + "/runs/fashion_mnist_mlp --format state_dict --output " + dir + "/mlp.pt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "export: 6 tensors of ")) << r.out;
  const double top1 = eval_top1(exp + small, dir + "/eval.json");
  // The demo's mlp: hidden_sizes [256, 128], relu, no dropout; trainyard's key names are PyTorch's.
  const std::string load =
      "class Mlp(torch.nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.layers = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, "
      "128),\n"
      "                                          torch.nn.ReLU(), torch.nn.Linear(128, 10))\n"
      "    def forward(self, x):\n"
      "        return self.layers(x.flatten(1))\n"
      "model = Mlp()\n"
      "state = torch.load('" +
      dir +
      "/mlp.pt', weights_only=True)\n"
      "print('keys', ' '.join(state))\n"
      "model.load_state_dict(state, strict=True)\n";
  const std::string out = python_accuracy(dir, accuracy_script(load));
  EXPECT_TRUE(contains(out,
                       "keys layers.0.weight layers.0.bias layers.2.weight layers.2.bias layers.4.weight "
                       "layers.4.bias"))
      << out;
  EXPECT_TRUE(contains(out, accuracy_text(top1))) << out << "eval: " << top1;

  // The same tensors as safetensors, read by the safetensors package into the same module, strictly.
  r = trainyard("export " + dir + "/runs/fashion_mnist_mlp --format safetensors --output " + dir + "/mlp.safetensors");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string from_safetensors = load;
  from_safetensors.replace(from_safetensors.find("state = torch.load('" + dir + "/mlp.pt', weights_only=True)"),
                           std::string("state = torch.load('" + dir + "/mlp.pt', weights_only=True)").size(),
                           "from safetensors import safe_open\n"
                           "from safetensors.torch import load_file\n"
                           "state = load_file('" +
                               dir +
                               "/mlp.safetensors')\n"
                               "print('metadata', safe_open('" +
                               dir + "/mlp.safetensors', 'pt').metadata())");
  const std::string st = python_accuracy(dir, accuracy_script(from_safetensors));
  EXPECT_TRUE(contains(st,
                       "keys layers.0.weight layers.0.bias layers.2.weight layers.2.bias layers.4.weight "
                       "layers.4.bias"))
      << st;
  EXPECT_TRUE(contains(st, "'format': 'pt'")) << st;
  EXPECT_TRUE(contains(st, "'task': '{\"trainyard\"")) << st;
  // Beside the weights: the task, its classes and how an image becomes an input.
  const std::string meta = read_file(dir + "/mlp.safetensors.json");
  for (const char* part : {"\"task\": \"classification\"", "\"network\": \"mlp\"", "\"sample_shape\": [1, 28, 28]",
                           "\"mean\": [", "\"output\": \"[B, C] class scores"})
    EXPECT_TRUE(contains(meta, part)) << part << "\n" << meta;
  EXPECT_TRUE(contains(st, accuracy_text(top1))) << st << "eval: " << top1;

  // A network not built from TorchScript cannot be written as TorchScript: said, nothing written.
  r = trainyard("export " + dir + "/runs/fashion_mnist_mlp --format torchscript --output " + dir + "/no.pt");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err,
                       "error: command line: --format torchscript: network 'mlp' is not built from a "
                       "TorchScript module"))
      << r.err;
  EXPECT_FALSE(fs::exists(dir + "/no.pt"));
}

TEST(Export, ATorchScriptNetworkComesBackAsTorchScriptWithTheTrainedValues) {
  const std::string dir = temp_dir("script");
  write_file(
      dir + "/make.py",
      "import sys, torch\n"
      "class Net(torch.nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.features = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8),\n"
      "                                            torch.nn.ReLU(), torch.nn.MaxPool2d(4))\n"
      "        self.fc = torch.nn.Linear(8 * 7 * 7, 10)\n"
      "    def forward(self, x):\n"
      "        return self.fc(self.features(x).flatten(1))\n"
      "torch.manual_seed(0)\n"
      "torch.jit.script(Net()).save(sys.argv[1])\n");
  auto made = run_command(::trainyard::test::python() + " " + dir + "/make.py " + dir + "/net.pt");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string exp = source_dir() + "/experiments/fashion_mnist_mlp.yaml";
  // The mlp's own options do not apply to torchscript: replace the whole entry.
  std::string yaml = read_file(exp);
  const size_t at = yaml.find("network:"), end = yaml.find("\nloss:");
  yaml.replace(at, end - at, "network: {plugin: torchscript, path: " + dir + "/net.pt}\n");
  write_file(dir + "/script.yaml", yaml);
  // A TorchScript file is code: one that others can change is refused, and
  // loaded only when the user says so.
  fs::permissions(dir + "/net.pt", fs::perms(0666));
  const std::string check = "validate " + dir + "/script.yaml --set dataset.train.limit=64 --set dataset.test.limit=64";
  auto refused = trainyard(check);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_EQ(nonempty_lines(refused.err).size(), 1u) << refused.err;
  EXPECT_TRUE(contains(refused.err, dir + "/net.pt: refusing to load this TorchScript file: it is writable by others "
                                          "(mode 0666, owner "))
      << refused.err;
  auto allowed = trainyard(check + " --allow-insecure-plugins");
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_TRUE(contains(allowed.err, "TorchScript file loaded although it is writable by others")) << allowed.err;
  fs::permissions(dir + "/net.pt", fs::perms(0644));
  const std::string small = dir +
                            "/script.yaml --set dataset.train.limit=4000 --set dataset.test.limit=2000 "
                            "--set loop.epochs=1 --output-dir " +
                            dir + "/runs";
  ASSERT_EQ(trainyard("run " + small).exit_code, 0);
  auto r = trainyard("export " + small + " --format torchscript --output " + dir + "/trained.pt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double top1 = eval_top1(small, dir + "/eval.json");
  const std::string out = python_accuracy(
      dir, accuracy_script("model = torch.jit.load('" + dir +
                           "/trained.pt')\n"
                           "untrained = torch.jit.load('" +
                           dir +
                           "/net.pt')\n"
                           "print('changed', not torch.equal(model.fc.weight, untrained.fc.weight))\n"));
  EXPECT_TRUE(contains(out, "changed True")) << out;
  EXPECT_TRUE(contains(out, accuracy_text(top1))) << out << "eval: " << top1;
}

// pretrained: a state_dict saved by Python, its "model." prefix renamed, one
// key missing and one extra: loaded by name, the rest reported.
TEST(Pretrained, APythonStateDictLoadsWithRenamedKeysAndReportsMissingAndUnexpected) {
  const std::string dir = temp_dir("pretrained");
  write_file(dir + "/save.py",
             "import sys, torch\n"
             "torch.manual_seed(3)\n"
             "layers = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),\n"
             "                             torch.nn.ReLU(), torch.nn.Linear(128, 10))\n"
             "state = {'model.layers.' + k: v for k, v in layers.state_dict().items() if k != '4.bias'}\n"
             "state['model.extra'] = torch.zeros(3)\n"
             "torch.save(state, sys.argv[1])\n");
  auto saved = run_command(::trainyard::test::python() + " " + dir + "/save.py " + dir + "/weights.pt");
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  std::string yaml = read_file(source_dir() + "/experiments/fashion_mnist_mlp.yaml");
  yaml.replace(yaml.find("  activation: relu\n"), 18,
               "  activation: relu\n  pretrained: " + dir + "/weights.pt\n  pretrained_rename: {\"model.\": \"\"}\n");
  write_file(dir + "/exp.yaml", yaml);
  // lr 0: the weights stay what was loaded.
  const std::string args = dir +
                           "/exp.yaml --set optimizer.lr=0 --set dataset.train.limit=64 --set dataset.test.limit=64"
                           " --set loop.epochs=1 --output-dir " +
                           dir + "/runs";
  auto r = trainyard("run " + args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "pretrained: 5 tensors loaded from " + dir + "/weights.pt")) << r.err;
  EXPECT_TRUE(contains(r.err, "pretrained: missing (left as initialized): layers.4.bias")) << r.err;
  EXPECT_TRUE(contains(r.err, "pretrained: unexpected (ignored): extra")) << r.err;
  ASSERT_EQ(trainyard("export " + args + " --output " + dir + "/out.pt").exit_code, 0);
  write_file(dir + "/compare.py",
             "import sys, torch\n"
             "a = torch.load(sys.argv[1], weights_only=True); b = torch.load(sys.argv[2], weights_only=True)\n"
             "print('equal', all(torch.equal(b['layers.' + k[len('model.layers.'):]], v) for k, v in a.items() "
             "if k.startswith('model.layers.')))\n");
  auto compared =
      run_command(::trainyard::test::python() + " " + dir + "/compare.py " + dir + "/weights.pt " + dir + "/out.pt");
  EXPECT_TRUE(contains(compared.out, "equal True")) << compared.out << compared.err;

  // Nothing matches without the rename: one error line saying how to map the keys.
  const std::string rename_line = "  pretrained_rename: {\"model.\": \"\"}\n";
  yaml.replace(yaml.find(rename_line), rename_line.size(), "");
  write_file(dir + "/bare.yaml", yaml);
  r = trainyard("validate " + dir + "/bare.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "no key of this state_dict matches the network")) << r.err;
  EXPECT_TRUE(contains(r.err, "network.pretrained_rename")) << r.err;
}

}  // namespace
}  // namespace trainyard::test
