// Loading plugin libraries: the built-in ones, and every way a library can be refused.
#include <gtest/gtest.h>

#include "plugins/loader.h"
#include "support/support.h"
#include "trainyard/error.h"
#include "trainyard/version.h"

namespace trainyard::host {
namespace {

using test::contains;

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
  EXPECT_EQ(r.names(Kind::dataset), (std::vector<std::string>{"csv", "fashion_mnist", "image_folder", "lmdb", "synthetic", "webdataset"}));
  EXPECT_EQ(r.names(Kind::network), (std::vector<std::string>{"convnet", "mlp", "resnet", "torchscript"}));
  EXPECT_EQ(r.names(Kind::loss), (std::vector<std::string>{"cross_entropy"}));
  EXPECT_EQ(r.names(Kind::optimizer), (std::vector<std::string>{"adam", "adamw", "rmsprop", "sgd"}));
  EXPECT_EQ(r.names(Kind::meter), (std::vector<std::string>{"confusion_matrix", "loss", "topk_accuracy"}));
  EXPECT_EQ(r.names(Kind::callback), (std::vector<std::string>{"console", "csv_logger", "mlflow_logger", "tensorboard"}));
  EXPECT_EQ(r.names(Kind::additional_override), (std::vector<std::string>{"cyclic", "no_test_no_checkpoint", "one_cycle", "overfit_batches"}));
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
  EXPECT_TRUE(contains(err, "sdk-changes.md")) << err;  // where to read it
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
  EXPECT_TRUE(contains(err, "built against a newer SDK than this host; expected API " + api() +
                                " or an older minor, got " + api(0, 1)))
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

TEST(PluginLoader, DuplicateKindAndNameNamesBothFiles) {
  Registry r;
  std::string err = load_error("twins", r);
  EXPECT_TRUE(contains(err, "loss 'twin' is registered twice")) << err;
  EXPECT_TRUE(contains(err, "libtwin_a.so")) << err;
  EXPECT_TRUE(contains(err, "libtwin_b.so")) << err;
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

TEST(Registry, UnknownNameListsKnownAndSuggests) {
  Registry r;
  load_plugin_folders({{test::builtin_plugin_dir(), "built-in"}}, r);
  try {
    r.get(Kind::optimizer, "adma");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "optimizer 'adma' is not registered (known optimizers: adam, adamw, rmsprop, sgd); did you mean 'adam'?"))
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
  if (xdg) ::setenv("XDG_DATA_HOME", saved.c_str(), 1);
  else ::unsetenv("XDG_DATA_HOME");
  ASSERT_EQ(folders.size(), 6u);
  EXPECT_EQ(folders[0].origin, "built-in");
  EXPECT_EQ(folders[1].path, "/xdg/trainyard/plugins");
  EXPECT_EQ(folders[1].origin, "user folder");
  EXPECT_EQ(folders[2].path, "/env/a");
  EXPECT_EQ(folders[3].path, "/env/b");
  EXPECT_EQ(folders[4].path, "/yaml/dir");
  EXPECT_EQ(folders[5].path, "/cli/dir");
}

}  // namespace
}  // namespace trainyard::host
