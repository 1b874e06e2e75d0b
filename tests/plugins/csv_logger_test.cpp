// The csv_logger plugin's file, read by Python's csv module: a row per event,
// a header of every value name, and a resumed run that continues the file.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/support.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

// phase counts, the header and the iterations of each phase, as Python reads them.
std::string read_with_python(const std::string& csv) {
  const std::string script =
      "import csv, sys, collections\n"
      "rows = list(csv.DictReader(open(sys.argv[1])))\n"
      "print('header', ','.join(rows[0].keys()))\n"
      "count = collections.Counter(r['phase'] for r in rows)\n"
      "print('counts', ' '.join(f'{k}={count[k]}' for k in sorted(count)))\n"
      "for phase in sorted(count):\n"
      "    print(phase, ' '.join(r['iteration'] for r in rows if r['phase'] == phase))\n"
      "print('test_top1', ' '.join(r['test_accuracy_top1'] for r in rows if r['phase'] == 'test'))\n"
      "print('empty lr in test rows', all(r['lr'] == '' for r in rows if r['phase'] == 'test'))\n";
  const std::string file = temp_dir("py") + "/read.py";
  write_file(file, script);
  auto r = run_command(::trainyard::test::python() + " " + file + " " + csv);
  return r.exit_code == 0 ? r.out : "python failed: " + r.err;
}

TEST(CsvLogger, ARowPerEventAHeaderOfEveryNameAndAResumeContinuesTheFile) {
  const std::string dir = temp_dir("csv");
  const std::string logger = "callbacks: [{plugin: csv_logger, every_iters: 4}";
  write_file(dir + "/straight.yaml", synthetic_experiment("straight", logger + "]\n"));
  ASSERT_EQ(trainyard("run " + dir + "/straight.yaml --output-dir " + dir).exit_code, 0);
  const std::string straight = read_with_python(dir + "/straight/metrics.csv");
  // 512 samples / 32 = 16 iterations per epoch, 2 epochs: train_step rows at 4, 8, ..., 32.
  EXPECT_TRUE(contains(straight, "header phase,epoch,iteration,batch_loss,lr,samples_per_sec,")) << straight;
  EXPECT_TRUE(contains(straight, "test_accuracy_top1")) << straight;
  EXPECT_TRUE(contains(straight, "counts test=2 train=2 train_step=8")) << straight;
  EXPECT_TRUE(contains(straight, "train_step 4 8 12 16 20 24 28 32\n")) << straight;
  EXPECT_TRUE(contains(straight, "empty lr in test rows True")) << straight;

  // Stopped at iteration 10 and resumed: the same rows as straight through.
  write_file(dir + "/split.yaml", synthetic_experiment("split", logger + ", {plugin: stop_at, iteration: 10}]\n"));
  ASSERT_EQ(trainyard("run " + dir + "/split.yaml --output-dir " + dir + " --plugin-dir " + fixture_dir("components"))
                .exit_code,
            0);
  write_file(dir + "/split.yaml", synthetic_experiment("split", logger + "]\n"));
  ASSERT_EQ(trainyard("run " + dir + "/split.yaml --output-dir " + dir + " --allow-config-change").exit_code, 0);
  const std::string split = read_with_python(dir + "/split/metrics.csv");
  EXPECT_TRUE(contains(split, "counts test=2 train=2 train_step=8")) << split;
  EXPECT_TRUE(contains(split, "train_step 4 8 12 16 20 24 28 32\n")) << split;
  const auto top1 = [](const std::string& out) { return out.substr(out.find("test_top1")); };
  EXPECT_EQ(top1(split), top1(straight));
}

}  // namespace
}  // namespace trainyard::test
