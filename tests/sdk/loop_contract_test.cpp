// The SDK 1.0 loop contract, as plugins see it (the test_components fixture
// callbacks, run by the trainyard binary): epoch(), position() and
// iteration() at each callback hook as trainyard/loop.h documents them, meter
// readings that tell a fresh test value from a left-over one, and structured
// meter results written to RUN_DIR/meters/.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "support/support.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

using test::contains;

// 512 training samples in batches of 32: 16 iterations per epoch.
std::string experiment(const std::string& name, const std::string& log, const std::string& more) {
  return "name: " + name +
         "\nseed: 7\n"
         "dataset:\n"
         "  train: {plugin: synthetic, size: 512, num_classes: 4, shape: [1, 4, 4], seed: 1}\n"
         "  test: {plugin: synthetic, size: 128, num_classes: 4, shape: [1, 4, 4], seed: 2}\n"
         "network: {plugin: mlp, hidden_sizes: [16]}\n"
         "loss: {plugin: cross_entropy}\n"
         "optimizer: {plugin: sgd, lr: 0.05}\n"
         "meters:\n"
         "  - {plugin: topk_accuracy}\n"
         "  - {plugin: confusion_matrix, phases: [test]}\n"
         "callbacks: [{plugin: position_log, path: " +
         log +
         "}]\n"
         "distributed: {threads_per_process: 1}\n" +
         more;
}

struct RunResult {
  std::string run_dir;
  std::vector<std::string> lines;
  test::CommandResult result;
};

RunResult run(const std::string& name, const std::string& more) {
  RunResult r;
  const std::string dir = test::temp_dir("sdk-" + name);
  const std::string log = dir + "/positions", exp = dir + "/" + name + ".yaml";
  test::write_file(exp, experiment(name, log, more));
  r.result =
      test::trainyard("run " + exp + " --output-dir " + dir + "/out --plugin-dir " + test::fixture_dir("components"));
  r.run_dir = dir + "/out/" + name;
  if (fs::exists(log)) r.lines = test::read_lines(log);
  return r;
}

std::string at(const std::string& hook, int64_t epoch, int64_t position, int64_t iteration) {
  return hook + " e" + std::to_string(epoch) + " p" + std::to_string(position) + " i" + std::to_string(iteration);
}

TEST(SdkLoop, CallbackHooksSeeEpochPositionAndIterationAsDocumented) {
  // Two epochs, a periodic test every 12 iterations (at 12 and 24) besides
  // the test at each epoch's end (16 and 32).
  RunResult r = run("positions", "loop: {epochs: 2, batch_per_device: 32, test_every_iters: 12}\n");
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  std::vector<std::string> expected = {at("before_run", 0, 0, 0)};
  int64_t iteration = 0;
  for (int64_t e = 0; e < 2; ++e) {
    expected.push_back(at("before_epoch", e, 0, iteration));
    for (int64_t p = 0; p < 16; ++p) {
      expected.push_back(at("before_train_iter", e, p, iteration));
      ++iteration;
      expected.push_back(at("after_train_iter", e, p + 1, iteration));
      if (iteration % 12 == 0) {  // periodic: mid-epoch, the batches done so far
        expected.push_back(at("before_test", e, p + 1, iteration));
        expected.push_back(at("after_test", e, p + 1, iteration));
      }
    }
    // The epoch's end: epoch() has counted it, position() is back to 0.
    expected.push_back(at("before_test", e + 1, 0, iteration));
    expected.push_back(at("after_test", e + 1, 0, iteration));
    // after_epoch, then the epoch's checkpoint (which holds what it did).
    expected.push_back(at("after_epoch", e + 1, 0, iteration));
    expected.push_back("reading test_accuracy_top1 e" + std::to_string(e + 1) + " i" + std::to_string(iteration) +
                       " fresh");
    expected.push_back("reading test_mean_class_recall e" + std::to_string(e + 1) + " i" + std::to_string(iteration) +
                       " fresh");
    expected.push_back(at("before_checkpoint", e + 1, 0, iteration));
    expected.push_back(at("after_checkpoint", e + 1, 0, iteration));
  }
  expected.push_back(at("after_run", 2, 0, 32));
  EXPECT_EQ(r.lines, expected);
}

TEST(SdkLoop, MeterReadingsTellAFreshTestValueFromALeftOverOne) {
  // test_every_other skips the first and third epoch-end tests: after epoch 1
  // there is no test reading, after epoch 2 a fresh one, after epoch 3 the
  // one from epoch 2 (iteration 32), left over.
  RunResult r = run("readings", "loop: {epochs: 3, batch_per_device: 32}\noverrides: [{plugin: test_every_other}]\n");
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  std::vector<std::string> readings;
  for (const auto& line : r.lines)
    if (line.rfind("after_epoch", 0) == 0 || line.rfind("reading test_accuracy_top1", 0) == 0) readings.push_back(line);
  EXPECT_EQ(readings, (std::vector<std::string>{at("after_epoch", 1, 0, 16), at("after_epoch", 2, 0, 32),
                                                "reading test_accuracy_top1 e2 i32 fresh", at("after_epoch", 3, 0, 48),
                                                "reading test_accuracy_top1 e2 i32 old"}));
}

TEST(SdkLoop, StructuredMeterResultsAreWrittenUnderTheRunDirectoryAtEachTest) {
  RunResult r = run("results", "loop: {epochs: 2, batch_per_device: 32, test_every_iters: 12}\n");
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  const std::string meters = r.run_dir + "/meters/";
  // Epoch ends: <name>-e<epoch>; mid-epoch tests add -i<iteration>.
  for (const char* file : {"confusion_matrix-e1.csv", "confusion_matrix-e2.csv", "per_class-e1.csv", "per_class-e2.csv",
                           "confusion_matrix-e0-i12.csv", "per_class-e1-i24.csv"})
    EXPECT_TRUE(fs::exists(meters + file)) << file;
  auto matrix = test::read_lines(meters + "confusion_matrix-e2.csv");
  ASSERT_EQ(matrix.size(), 5u);  // header and one row per class
  EXPECT_EQ(matrix[0], "true/predicted,0,1,2,3");
  int64_t total = 0;
  for (size_t row = 1; row < matrix.size(); ++row) {
    std::stringstream cells(matrix[row]);
    std::string cell;
    std::getline(cells, cell, ',');
    EXPECT_EQ(cell, std::to_string(row - 1));
    while (std::getline(cells, cell, ',')) total += std::stoll(cell);
  }
  EXPECT_EQ(total, 128);  // every test sample counted once
  auto report = test::read_lines(meters + "per_class-e2.csv");
  ASSERT_EQ(report.size(), 5u);
  EXPECT_EQ(report[0], "class,support,precision,recall,f1");
  // Train meters write no results.
  for (const auto& entry : fs::directory_iterator(meters))
    EXPECT_TRUE(contains(entry.path().filename().string(), "-e")) << entry.path();
  // The report shows each result's latest table.
  const std::string html = test::read_file(r.run_dir + "/report.html");
  EXPECT_TRUE(contains(html, "<h2>Meter results</h2>")) << html;
  EXPECT_TRUE(contains(html, "<h3>confusion_matrix</h3>\n<p class=\"muted\">latest: meters/confusion_matrix-e2.csv"))
      << html;
  EXPECT_TRUE(contains(html, "<th>true/predicted</th><th>0</th>")) << html;
  EXPECT_TRUE(contains(html, "<th>class</th><th>support</th><th>precision</th>")) << html;
}

}  // namespace
}  // namespace trainyard::host
