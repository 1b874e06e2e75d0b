// trainyard's bash completion, run by a real bash: the script sourced, the
// completion function called as bash would call it.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/support.h"

namespace trainyard::test {
namespace {

// What the completion offers for a command line (words as bash splits them:
// at spaces and at '='), the cursor at the last word.
std::string complete(const std::vector<std::string>& words) {
  std::string array;
  for (const auto& w : words) array += " '" + w + "'";
  const std::string dir = temp_dir("bash");
  write_file(dir + "/try.sh", "source <('" + trainyard_binary() +
                                  "' completion bash)\n"
                                  "COMP_WORDS=('" +
                                  trainyard_binary() + "'" + array +
                                  ")\n"
                                  "COMP_CWORD=" +
                                  std::to_string(words.size()) +
                                  "\n"
                                  "_trainyard\n"
                                  "printf '%s\\n' \"${COMPREPLY[@]}\"\n");
  auto r = run_command("bash " + dir + "/try.sh");
  return r.exit_code == 0 ? r.out : "bash failed: " + r.err;
}

TEST(Completion, CommandsFlagsKeysAndComponentNames) {
  const std::string exp = source_dir() + "/experiments/fashion_mnist_mlp.yaml";
  EXPECT_EQ(complete({"ru"}), "run\n");
  EXPECT_TRUE(contains(complete({""}), "export\n")) << complete({""});
  EXPECT_FALSE(contains(complete({""}), "__complete"));
  // A command's flags, read from its --help.
  const std::string flags = complete({"run", exp, "--"});
  for (const char* flag : {"--nproc-per-node\n", "--output-dir\n", "--set\n", "--fresh\n"})
    EXPECT_TRUE(contains(flags, flag)) << flag << "\n" << flags;
  EXPECT_EQ(complete({"export", exp, "--for"}), "--format\n");
  EXPECT_EQ(complete({"export", exp, "--format", "st"}), "state_dict\n");
  // Every export format, from export's own table (safetensors was missing).
  EXPECT_EQ(complete({"export", exp, "--format", ""}), "safetensors\nstate_dict\ntorchscript\n");
  EXPECT_EQ(complete({"export", exp, "--format", "s"}), "safetensors\nstate_dict\n");
  // --set keys: the host's, and the experiment's components' options.
  EXPECT_EQ(complete({"run", exp, "--set", "loop.epo"}), "loop.epochs=\n");
  EXPECT_EQ(complete({"run", exp, "--set", "network.hidden"}), "network.hidden_sizes=\n");
  EXPECT_EQ(complete({"run", exp, "--set", "optimizer.nest"}), "optimizer.nesterov=\n");
  // Registered component names.
  EXPECT_EQ(complete({"describe", "ml"}), "mlflow_logger\nmlp\n");
  EXPECT_EQ(complete({"run", exp, "--set", "network.plugin", "=", "con"}), "convnet\n");
  EXPECT_EQ(complete({"completion", ""}), "bash\n");
}

TEST(Completion, AnExperimentOthersCanChangeDoesNotLoadItsPluginFolders) {
  // A TAB press next to an experiment file loads the plugin folders it names
  // only when the file is trusted as plugin code is (yours or root's,
  // writable by nobody else).
  const std::string exp = temp_dir("exp-complete") + "/theirs.yaml";
  write_file(exp, "name: theirs\nplugin_dirs: [" + fixture_dir("misbehaving") +
                      "]\n"
                      "dataset: {train: {plugin: misfit_data}, test: {plugin: misfit_data}}\n"
                      "network: {plugin: misfit}\nloss: {plugin: cross_entropy}\noptimizer: {plugin: sgd, lr: 0.1}\n"
                      "loop: {epochs: 1, batch_per_device: 16}\n");
  std::filesystem::permissions(exp, std::filesystem::perms(0644));
  EXPECT_EQ(complete({"run", exp, "--set", "network.ou"}), "network.outputs=\n");
  std::filesystem::permissions(exp, std::filesystem::perms(0666));
  EXPECT_EQ(complete({"run", exp, "--set", "network.ou"}), "\n");            // nothing offered
  EXPECT_EQ(complete({"run", exp, "--set", "loop.epo"}), "loop.epochs=\n");  // the host's keys still complete
}

}  // namespace
}  // namespace trainyard::test
