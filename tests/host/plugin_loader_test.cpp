// Loading plugin libraries: the built-in ones, and every way a library can be refused.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "plugins/library_loader.h"
#include "support/support.h"
#include "trainyard/error.h"
#include "trainyard/version.h"

namespace trainyard::host {
namespace {

using test::contains;
namespace fs = std::filesystem;

// "1.2" for the host's API, with the minor or major shifted by `minor` / `major`.
std::string api(int major = 0, int minor = 0) {
  return std::to_string(TRAINYARD_API_MAJOR + major) + "." + std::to_string(TRAINYARD_API_MINOR + minor);
}

std::string load_error(const std::string& fixture, Registry& registry) {
  try {
    load_plugin_folders({{test::fixture_dir(fixture), "test"}}, registry);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PluginLoader, LoadsEveryBuiltinPlugin) {
  Registry r;
  load_plugin_folders({{test::builtin_plugin_dir(), "built-in"}}, r);
  EXPECT_EQ(r.names(Kind::dataset), (std::vector<std::string>{"coco", "csv", "fashion_mnist", "image_folder", "lmdb",
                                                              "synthetic", "synthetic_shapes", "webdataset"}));
  EXPECT_EQ(r.names(Kind::network),
            (std::vector<std::string>{"centernet", "convnet", "mlp", "resnet", "torchscript", "unet"}));
  EXPECT_EQ(r.names(Kind::loss), (std::vector<std::string>{"arcface", "centernet_loss", "contrastive", "cross_entropy",
                                                           "dice", "triplet_margin"}));
  EXPECT_EQ(r.names(Kind::optimizer), (std::vector<std::string>{"adam", "adamw", "rmsprop", "sgd"}));
  EXPECT_EQ(r.names(Kind::meter),
            (std::vector<std::string>{"coco_map", "confusion_matrix", "loss", "miou", "retrieval", "topk_accuracy"}));
  EXPECT_EQ(r.names(Kind::callback),
            (std::vector<std::string>{"console", "csv_logger", "mlflow_logger", "tensorboard"}));
  EXPECT_EQ(r.names(Kind::additional_override),
            (std::vector<std::string>{"cyclic", "no_test_no_checkpoint", "one_cycle", "overfit_batches"}));
  for (const auto& lib : r.libraries()) EXPECT_EQ(lib->fingerprint, TRAINYARD_FINGERPRINT) << lib->path;
}

TEST(PluginLoader, RefusesLibraryWithoutEntryPoint) {
  Registry r;
  std::string err = load_error("no_entry", r);
  EXPECT_TRUE(contains(err, "libno_entry.so: not a trainyard plugin: no 'trainyard_plugin_entry' entry point")) << err;
}

TEST(PluginLoader, RefusesDifferentMajorWithBothVersions) {
  Registry r;
  std::string err = load_error("wrong_major", r);
  EXPECT_TRUE(contains(err, "SDK API major version differs; expected " + api() + " (same major), got " + api(1, 0)))
      << err;
  EXPECT_TRUE(r.libraries().empty());
}

TEST(PluginLoader, RefusesPreOneSdkPluginSayingWhatChangedAndWhereToRead) {
  Registry r;
  std::string err = load_error("old_sdk", r);
  EXPECT_TRUE(contains(err, "libold_sdk.so: built by the pre-1.0 SDK 0.x (API 1.4), which this host no longer loads"))
      << err;
  EXPECT_TRUE(contains(err, "Dataset::get_seeded")) << err;  // what changed
  EXPECT_TRUE(contains(err, std::string("expected SDK ") + TRAINYARD_VERSION + " (API " + api() + "), got SDK 0.x"))
      << err;
  EXPECT_TRUE(contains(err, "sdk-changes.md")) << err;         // where to read it
  EXPECT_EQ(err.find("newer SDK"), std::string::npos) << err;  // not mistaken for a newer minor
  EXPECT_TRUE(r.libraries().empty());
}

TEST(PluginLoader, EntryRecordCarriesTheSdkVersion) {
  Registry r;
  load_plugin_folders({{test::builtin_plugin_dir(), "built-in"}}, r);
  ASSERT_FALSE(r.libraries().empty());
  EXPECT_EQ(std::string(sdk_version()), TRAINYARD_VERSION);
  EXPECT_EQ(api(), std::to_string(TRAINYARD_VERSION_MAJOR) + "." + std::to_string(TRAINYARD_VERSION_MINOR));
  EXPECT_EQ(std::string(sdk_api_version()), api());
}

TEST(PluginLoader, RefusesNewerMinorWithBothVersions) {
  Registry r;
  std::string err = load_error("newer_minor", r);
  EXPECT_TRUE(contains(
      err, "built against a newer SDK than this host; expected API " + api() + " or an older minor, got " + api(0, 1)))
      << err;
}

TEST(PluginLoader, RefusesFingerprintMismatchPrintingBothSides) {
  Registry r;
  std::string err = load_error("bad_fingerprint", r);
  EXPECT_TRUE(contains(err, "build fingerprint differs (plugin torch=2.3.1 vs host torch=")) << err;
  EXPECT_TRUE(contains(err, std::string("expected ") + TRAINYARD_FINGERPRINT)) << err;
  EXPECT_TRUE(contains(err, "torch=2.3.1")) << err;
}

TEST(PluginLoader, ReportsRegistrationThatThrowsAndKeepsNothing) {
  Registry r;
  std::string err = load_error("register_throws", r);
  EXPECT_TRUE(contains(err, "library 'fixture' failed while registering its components: fixture registration failure"))
      << err;
  EXPECT_TRUE(r.libraries().empty());
}

TEST(PluginLoader, AClashOfNamesLoadsEveryLibraryAndTheQualifiedNameChooses) {
  // twin_a and twin_b both register loss 'twin' and meter 'confusion_matrix',
  // which the built-in `meters` library registers too: all load.
  Registry r;
  load_plugin_folders({{test::builtin_plugin_dir(), "built-in"}, {test::fixture_dir("twins"), "test"}}, r);
  EXPECT_EQ(load_error("twins", r), "library 'twin_a' is loaded twice: from " + test::fixture_dir("twins") +
                                        "/libtwin_a.so and from " + test::fixture_dir("twins") +
                                        "/libtwin_a.so; expected one library per name (its components are named "
                                        "twin_a::NAME); remove one of the two files from the plugin folders");
  // The short name is ambiguous; each qualified name names one.
  EXPECT_EQ(r.find(Kind::loss, "twin"), nullptr);
  EXPECT_EQ(r.matches(Kind::loss, "twin").size(), 2u);
  ASSERT_NE(r.find(Kind::loss, "twin_b::twin"), nullptr);
  EXPECT_EQ(r.find(Kind::loss, "twin_b::twin")->library->name, "twin_b");
  EXPECT_EQ(r.get(Kind::meter, "meters::confusion_matrix").library->name, "meters");
  EXPECT_EQ(r.find(Kind::meter, "nowhere::confusion_matrix"), nullptr);
  try {
    r.get(Kind::meter, "confusion_matrix");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string dir = test::fixture_dir("twins");
    EXPECT_EQ(std::string(e.what()),
              "meter 'confusion_matrix' is ambiguous: 3 libraries register it (meters::confusion_matrix from " +
                  test::builtin_plugin_dir() + "/libmeters.so, twin_a::confusion_matrix from " + dir +
                  "/libtwin_a.so, twin_b::confusion_matrix from " + dir +
                  "/libtwin_b.so); expected a name that one library registers, or LIBRARY::NAME, got "
                  "'confusion_matrix'; write one of meters::confusion_matrix, twin_a::confusion_matrix, "
                  "twin_b::confusion_matrix");
  }
  // Unambiguous short names keep working; the listing qualifies the ambiguous ones.
  EXPECT_EQ(r.get(Kind::meter, "topk_accuracy").library->name, "meters");
  EXPECT_EQ(r.names(Kind::meter),
            (std::vector<std::string>{"coco_map", "loss", "meters::confusion_matrix", "miou", "retrieval",
                                      "topk_accuracy", "twin_a::confusion_matrix", "twin_b::confusion_matrix"}));
  EXPECT_EQ(r.names(Kind::loss), (std::vector<std::string>{"arcface", "centernet_loss", "contrastive", "cross_entropy",
                                                           "dice", "triplet_margin", "twin_a::twin", "twin_b::twin"}));
}

TEST(PluginLoader, MissingFolderIsAnError) {
  Registry r;
  try {
    load_plugin_folders({{"/nonexistent/plugins", "--plugin-dir"}}, r);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "/nonexistent/plugins: plugin folder does not exist (named by --plugin-dir)"));
  }
}

TEST(PluginLoader, RefusedLibrariesCanBeCollectedInsteadOfThrown) {
  Registry r;
  std::vector<std::string> refused;
  load_plugin_folders({{test::fixture_dir("wrong_major"), "test"}, {test::fixture_dir("components"), "test"}}, r,
                      &refused);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_TRUE(r.find(Kind::callback, "recorder") != nullptr);
}

// Plugin provenance: a library, or its folder, that someone other than this
// user or root can change is refused before a byte of it runs.
class InsecurePlugins : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = test::temp_dir("insecure") + "/plugins";
    fs::create_directories(folder_);
    fs::permissions(folder_, fs::perms(0755));
    library_ = folder_ + "/libtest_components.so";
    fs::copy_file(test::fixture_dir("components") + "/libtest_components.so", library_);
    fs::permissions(library_, fs::perms(0755));
    ::unsetenv("TRAINYARD_ALLOW_INSECURE_PLUGINS");
  }
  void TearDown() override { ::unsetenv("TRAINYARD_ALLOW_INSECURE_PLUGINS"); }
  std::string refusal() {
    Registry r;
    try {
      load_plugin_folders({{folder_, "--plugin-dir"}}, r);
    } catch (const ConfigError& e) {
      EXPECT_TRUE(r.libraries().empty());
      return e.what();
    }
    return "";
  }
  std::string folder_, library_;
};

TEST_F(InsecurePlugins, AWorldWritableFolderIsRefusedNamingItsModeAndOwner) {
  fs::permissions(folder_, fs::perms(0777));
  const std::string err = refusal();
  EXPECT_TRUE(contains(err, library_ + ": refusing to load this plugin library: its folder " + folder_ +
                                " is writable by others (mode 0777, owner root)"))
      << err;
  EXPECT_TRUE(contains(err, "pass --allow-insecure-plugins (or set TRAINYARD_ALLOW_INSECURE_PLUGINS=1)")) << err;
}

TEST_F(InsecurePlugins, AWorldWritableLibraryIsRefusedAndLoadsOnlyWhenAllowed) {
  fs::permissions(library_, fs::perms(0666));
  const std::string err = refusal();
  EXPECT_TRUE(contains(err, library_ + ": refusing to load this plugin library: it is writable by others (mode 0666, "
                                       "owner root)"))
      << err;
  ::setenv("TRAINYARD_ALLOW_INSECURE_PLUGINS", "1", 1);
  EXPECT_EQ(refusal(), "");
}

TEST_F(InsecurePlugins, AnotherUsersLibraryOrAGroupWritableFolderIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a file to another user needs root";
  ASSERT_EQ(::chown(library_.c_str(), 65534, 65534), 0);
  std::string err = refusal();
  EXPECT_TRUE(contains(err, "it is owned by nobody, not by root (mode 0755, owner nobody)")) << err;
  ASSERT_EQ(::chown(library_.c_str(), 0, 0), 0);
  // Group-writable: refused for a shared group (users, gid 100), accepted
  // for the owner's own private group (root's, which has no other members).
  ASSERT_EQ(::chown(folder_.c_str(), 0, 100), 0);
  fs::permissions(folder_, fs::perms(0775));
  err = refusal();
  EXPECT_TRUE(contains(err, "its folder " + folder_ + " is writable by its group (mode 0775, owner root)")) << err;
  ASSERT_EQ(::chown(folder_.c_str(), 0, 0), 0);
  EXPECT_EQ(refusal(), "");
}

TEST_F(InsecurePlugins, ALinkChainThroughAWritableFolderIsFollowedAndRefused) {
  // Was: a link whose target's own folder is safe loaded, though the path to
  // it passed through a folder anyone could write (and so swap what lies beyond).
  const std::string base = test::temp_dir("insecure-chain");
  const std::string open_folder = base + "/open", safe = open_folder + "/safe";
  fs::create_directories(safe);
  fs::permissions(safe, fs::perms(0755));
  fs::rename(library_, safe + "/libtest_components.so");
  fs::permissions(open_folder, fs::perms(0777));  // not sticky: anyone may rename safe/
  // plugins/libtest_components.so -> hop -> open/safe/libtest_components.so: two links.
  fs::create_symlink(safe + "/libtest_components.so", base + "/hop");
  fs::create_symlink(base + "/hop", library_);
  std::string err = refusal();
  EXPECT_TRUE(contains(err, library_ + ": refusing to load this plugin library: the folder " + open_folder +
                                " it passes through is writable by others (mode 0777, owner root)"))
      << err;
  // A sticky folder (as /tmp) is passed through safely: only the entry's owner could change it.
  fs::permissions(open_folder, fs::perms(01777));
  EXPECT_EQ(refusal(), "");
  // A link on the way that is someone else's is refused, wherever it points.
  if (::geteuid() == 0) {
    ASSERT_EQ(::lchown((base + "/hop").c_str(), 65534, 65534), 0);
    err = refusal();
    EXPECT_TRUE(contains(err, "the link " + base + "/hop it passes through is owned by nobody, not by root")) << err;
  }
}

TEST_F(InsecurePlugins, ALibraryForAnotherMachineNamesBothElfMachines) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "the expected text names x86-64 as this host's machine";
#endif
  // The same library with its ELF header's e_machine (bytes 18-19, little-endian) set to aarch64 (183).
  {
    std::fstream f(library_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(18);
    const char aarch64[2] = {static_cast<char>(183), 0};
    f.write(aarch64, 2);
    ASSERT_TRUE(f.good());
  }
  const std::string err = refusal();
  EXPECT_TRUE(contains(err, library_ + ": a library built for another machine; expected ELF machine x86-64 (this "
                                       "host's), got aarch64; rebuild the plugin"))
      << err;
  EXPECT_FALSE(contains(err, "No such file")) << err;
}

TEST(Registry, UnknownNameListsKnownAndSuggests) {
  Registry r;
  load_plugin_folders({{test::builtin_plugin_dir(), "built-in"}}, r);
  try {
    r.get(Kind::optimizer, "adma");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(
        e.what(),
        "optimizer 'adma' is not registered (known optimizers: adam, adamw, rmsprop, sgd); did you mean 'adam'?"))
        << e.what();
  }
}

TEST(PluginSearchPath, OrderIsBuiltinUserEnvExperimentCommandLine) {
  ::setenv("TRAINYARD_PLUGIN_PATH", "/env/a:/env/b", 1);
  const char* xdg = std::getenv("XDG_DATA_HOME");
  const std::string saved = xdg ? xdg : "";
  ::setenv("XDG_DATA_HOME", "/xdg", 1);
  auto folders = plugin_search_path({"/yaml/dir"}, {"/cli/dir"});
  ::unsetenv("TRAINYARD_PLUGIN_PATH");
  if (xdg)
    ::setenv("XDG_DATA_HOME", saved.c_str(), 1);
  else
    ::unsetenv("XDG_DATA_HOME");
  ASSERT_EQ(folders.size(), 6u);
  EXPECT_EQ(folders[0].origin, "built-in");
  EXPECT_EQ(folders[1].path, "/xdg/trainyard/plugins");
  EXPECT_EQ(folders[1].origin, "user folder");
  EXPECT_EQ(folders[2].path, "/env/a");
  EXPECT_EQ(folders[3].path, "/env/b");
  EXPECT_EQ(folders[4].path, "/yaml/dir");
  EXPECT_EQ(folders[5].path, "/cli/dir");
}

// Plugins built with the headers SDK 1.0 and 1.1 shipped (fixtures/sdk-1.X),
// unrebuilt: today's host loads them, trains with their dataset and calls
// their callback, never a function their SDK did not have (a 1.0 callback's
// vtable ends before 1.1's after_test_batch).
class OlderSdk : public ::testing::TestWithParam<std::string> {};

TEST_P(OlderSdk, APluginBuiltWithItsHeadersLoadsTrainsAndHearsOnlyItsOwnEvents) {
  const std::string minor = GetParam();  // "0", "1" or "4"
  const std::string suffix = "_1_" + minor;
  const std::string dir = test::temp_dir("older-sdk" + suffix);
  const std::string events = dir + "/events.txt", exp = dir + "/exp.yaml";
  test::write_file(exp, "name: older" + suffix +
                            "\n"
                            "dataset:\n"
                            "  train: {plugin: tiny" +
                            suffix +
                            ", size: 64}\n"
                            "  test: {plugin: tiny" +
                            suffix +
                            ", size: 32}\n"
                            "network: {plugin: mlp, hidden_sizes: [8]}\n"
                            "loss: {plugin: cross_entropy}\n"
                            "optimizer: {plugin: sgd, lr: 0.1}\n"
                            "meters: [{plugin: loss}]\n"
                            "callbacks: [{plugin: events" +
                            suffix + ", path: " + events +
                            "}]\n"
                            "loop: {epochs: 2, batch_per_device: 16, test_batch_per_device: 16}\n"
                            "distributed: {threads_per_process: 1}\n");
  const auto plugins = test::trainyard("plugins --plugin-dir " + test::fixture_dir("older_sdk"));
  ASSERT_EQ(plugins.exit_code, 0) << plugins.err;
  EXPECT_TRUE(contains(plugins.out, "older_sdk" + suffix + " 1." + minor + ".0 (API 1." + minor + ")")) << plugins.out;

  const auto run = test::trainyard("run " + exp + " --plugin-dir " + test::fixture_dir("older_sdk") + " --output-dir " +
                                   dir + "/out");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string heard = test::read_file(events);
  EXPECT_TRUE(contains(heard, "before_run\n")) << heard;
  EXPECT_TRUE(contains(heard, "after_test test_loss=yes\nafter_epoch 1\n")) << heard;
  EXPECT_TRUE(contains(heard, "after_epoch 2\nafter_run\n")) << heard;
  // 32 test samples in batches of 16: two per pass, two passes.
  if (minor != "0") {
    EXPECT_EQ(std::count(heard.begin(), heard.end(), '/'), 4) << heard;
    EXPECT_TRUE(contains(heard, "after_test_batch 2/2\n")) << heard;
  } else {
    EXPECT_FALSE(contains(heard, "after_test_batch")) << heard;
  }
}

INSTANTIATE_TEST_SUITE_P(Sdk, OlderSdk, ::testing::Values("0", "1", "4"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return "Minor" + info.param; });

}  // namespace
}  // namespace trainyard::host
