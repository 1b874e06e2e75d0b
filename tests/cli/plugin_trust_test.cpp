// Plugin provenance from the command line: a library others can change is
// refused unless --allow-insecure-plugins says so, and a run resumes only
// with the plugin code it started with unless --allow-plugin-change says so.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/support.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

// A plugin folder of our own holding a copy of the test components.
std::string own_plugin_folder(const std::string& name) {
  const std::string folder = temp_dir(name) + "/plugins";
  fs::create_directories(folder);
  fs::permissions(folder, fs::perms(0755));
  fs::copy_file(fixture_dir("components") + "/libtest_components.so", folder + "/libtest_components.so");
  fs::permissions(folder + "/libtest_components.so", fs::perms(0755));
  return folder;
}

TEST(PluginTrust, AWorldWritablePluginFolderIsRefusedAndLoadedOnlyWithTheFlag) {
  const std::string folder = own_plugin_folder("trust-cli");
  fs::permissions(folder, fs::perms(0777));
  auto r = trainyard("describe position_log --plugin-dir " + folder);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  ASSERT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "error: " + folder +
                                  "/libtest_components.so: refusing to load this plugin library: its "
                                  "folder " +
                                  folder + " is writable by others (mode 0777, owner "))
      << r.err;
  r = trainyard("describe position_log --plugin-dir " + folder + " --allow-insecure-plugins");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "position_log")) << r.out;
  EXPECT_TRUE(contains(r.err, "warning: " + folder +
                                  "/libtest_components.so: plugin library loaded although its "
                                  "folder " +
                                  folder + " is writable by others"))
      << r.err;
  r = trainyard_with_env("TRAINYARD_ALLOW_INSECURE_PLUGINS=1", "describe position_log --plugin-dir " + folder);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(PluginTrust, AResumeWithChangedPluginCodeIsRefusedUnlessAccepted) {
  const std::string folder = own_plugin_folder("changed");
  const std::string exp = temp_dir("exp-changed") + "/changed.yaml", out = temp_dir("out-changed");
  // The run uses a component of the copied library (a callback logging positions).
  write_file(exp,
             synthetic_experiment("changed", "callbacks: [{plugin: position_log, path: " + out + "/positions}]\n"));
  const std::string args = "run " + exp + " --plugin-dir " + folder + " --output-dir " + out;
  ASSERT_EQ(trainyard(args + " --set loop.epochs=1").exit_code, 0);
  // The same file name and fingerprint, other bytes: what a rebuild leaves.
  std::ofstream(folder + "/libtest_components.so", std::ios::app) << "rebuilt";
  auto r = trainyard(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  ASSERT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err,
                       "/changed/provenance.json: resuming with plugin code that changed since the run started "
                       "(libtest_components.so (test_components 0.1.0): SHA-256 "))
      << r.err;
  EXPECT_TRUE(contains(r.err, "run with --allow-plugin-change to resume with the new code")) << r.err;
  r = trainyard(args + " --allow-plugin-change");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(
      contains(r.err, "warning: --allow-plugin-change: resuming with changed plugin code: libtest_components.so"))
      << r.err;
  EXPECT_TRUE(contains(r.out, "resuming from ")) << r.out;
}

TEST(PluginTrust, ADamagedOrMissingProvenanceRecordIsRefusedOnResumeNotTakenForNoChange) {
  const std::string exp = temp_dir("exp-record") + "/record.yaml", out = temp_dir("out-record");
  write_file(exp, synthetic_experiment("record", ""));
  const std::string args = "run " + exp + " --output-dir " + out, record = out + "/record/provenance.json";
  ASSERT_EQ(trainyard(args + " --set loop.epochs=1").exit_code, 0);
  const std::string intact = read_file(record);
  const std::vector<std::pair<std::string, std::string>> damages = {
      {"", "record/provenance.json: missing; expected the record of the plugin libraries"},
      {"{\"plugins\": [", "record/provenance.json: damaged ("},
      {"{\"command\": []}", "record/provenance.json: damaged (no \"plugins\" list)"}};
  for (const auto& [text, expected] : damages) {
    if (text.empty())
      fs::remove(record);
    else
      write_file(record, text);
    auto r = trainyard(args + " --set loop.epochs=2");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    ASSERT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_TRUE(contains(r.err, expected)) << r.err;
    EXPECT_TRUE(contains(r.err, "run with --allow-plugin-change to resume without the check")) << r.err;
  }
  // The flag resumes, says so, and writes the record anew.
  auto r = trainyard(args + " --set loop.epochs=2 --allow-plugin-change");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "warning: --allow-plugin-change: resuming without the changed-plugin check")) << r.err;
  EXPECT_TRUE(contains(read_file(record), "\"sha256\"")) << read_file(record);
  EXPECT_NE(intact, "");
}

}  // namespace
}  // namespace trainyard::test
