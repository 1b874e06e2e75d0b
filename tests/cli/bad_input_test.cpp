// The bad-input corpus: every case gives one clear "error:" line and exit 2,
// and writes nothing.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/support.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

struct Case {
  std::string name, command, expected;
};

void expect_one_clear_error(const Case& c) {
  const std::string out = temp_dir("out-" + c.name);
  auto r = trainyard(c.command + " --output-dir " + out);
  EXPECT_EQ(r.exit_code, 2) << c.name << ": " << r.err;
  size_t lines = 0;
  for (const auto& line : [&] {
         std::vector<std::string> v;
         std::string cur;
         for (char ch : r.err) {
           if (ch == '\n') v.push_back(cur), cur.clear();
           else cur += ch;
         }
         if (!cur.empty()) v.push_back(cur);
         return v;
       }())
    if (!line.empty()) ++lines;
  EXPECT_EQ(lines, 1u) << c.name << ": " << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << c.name << ": " << r.err;
  EXPECT_TRUE(contains(r.err, c.expected)) << c.name << ": expected '" << c.expected << "' in: " << r.err;
  EXPECT_TRUE(fs::is_empty(out)) << c.name << ": something was written";
}

TEST(BadInput, EveryExperimentInTheCorpusIsOneClearErrorAndExitTwo) {
  // tests/bad_inputs/experiments/*.yaml: the first line says what the error must contain.
  int cases = 0;
  for (const auto& f : fs::directory_iterator(source_dir() + "/tests/bad_inputs/experiments")) {
    const std::string first = read_lines(f.path().string()).at(0);
    ASSERT_EQ(first.rfind("# expect: ", 0), 0u) << f.path();
    const std::string name = f.path().stem().string();
    // Both the check and the run refuse it, the same way, before anything is written.
    expect_one_clear_error({name, "run " + f.path().string(), first.substr(10)});
    ++cases;
  }
  EXPECT_GE(cases, 20);
}

TEST(BadInput, EveryBrokenPluginLibraryIsOneClearErrorAndExitTwo) {
  const std::string exp = source_dir() + "/tests/bad_inputs/experiments/unknown_plugin.yaml";
  const std::vector<std::pair<std::string, std::string>> libraries = {
      {"no_entry", "no 'trainyard_plugin_entry' entry point"},
      {"wrong_major", "SDK API major version differs"},
      {"newer_minor", "built against a newer SDK than this host"},
      {"bad_fingerprint", "build fingerprint differs"},
      {"register_throws", "failed while registering its components"},
      {"twins", "is registered twice"}};
  for (const auto& [dir, expected] : libraries)
    expect_one_clear_error({dir, "run " + exp + " --plugin-dir " + fixture_dir(dir), expected});
}

}  // namespace
}  // namespace trainyard::test
