// `trainyard run --profile A:B`: the Kineto trace read back by TensorBoard's
// PyTorch profiler plugin (torch-tb-profiler, the reader TensorBoard's
// profile view runs), its steps and operators checked against the summary.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/support.h"

namespace trainyard::test {
namespace {

// The summary's row for `op`: calls and self milliseconds.
bool summary_row(const std::string& summary, const std::string& op, int64_t& calls, double& self_ms) {
  std::istringstream lines(summary);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string name;
    if (fields >> name && name == op && fields >> calls >> self_ms) return true;
  }
  return false;
}

TEST(Profiler, TheTraceOfTheAskedStepsOpensInTensorBoardsProfilerWithTheNetworksOperators) {
  const std::string exp = temp_dir("exp-profile") + "/profile.yaml", out = temp_dir("out-profile");
  write_file(exp, synthetic_experiment("profile"));
  // 16 iterations an epoch: skip 3, record iterations 4 to 8.
  const auto r = trainyard("run " + exp + " --output-dir " + out + " --profile 3:8");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string dir = out + "/profile/profile";
  EXPECT_TRUE(contains(r.out, "trainyard: profile in " + dir + "/rank0.pt.trace.json")) << r.out;
  EXPECT_TRUE(contains(r.out, "iterations 4-8: 5 steps recorded")) << r.out;
  EXPECT_TRUE(contains(r.out, "forward")) << r.out;
  // The step's split adds up: phases (each its own time) and the remainder, none negative.
  const std::vector<int> shares = profile_step_shares(read_file(out + "/profile/profile/rank0.summary.txt"));
  ASSERT_GE(shares.size(), 5u) << r.out;  // data wait, forward, backward, optimizer, trainyard
  int sum = 0;
  for (int share : shares) {
    EXPECT_GE(share, 0) << r.out;
    sum += share;
  }
  EXPECT_NEAR(sum, 100, static_cast<int>(shares.size())) << "each share rounded to a percent: " << r.out;
  // The summary under that line fits 80 columns.
  const auto console = nonempty_lines(r.out);
  auto at =
      std::find_if(console.begin(), console.end(), [](const auto& l) { return contains(l, "trainyard: profile in"); });
  ASSERT_NE(at, console.end());
  for (++at; at != console.end() && at->rfind("  ", 0) == 0; ++at) EXPECT_LE(at->size(), 80u) << *at;
  const std::string summary = read_file(dir + "/rank0.summary.txt");
  int64_t calls = 0;
  double self_ms = 0;
  ASSERT_TRUE(summary_row(summary, "aten::addmm", calls, self_ms)) << summary;
  // Two linear layers, forward only: 2 addmm per step.
  EXPECT_EQ(calls, 10) << summary;

  // TensorBoard's reader: the steps by their ProfilerStep numbers, and the
  // operators with their calls and self times.
  write_file(dir + "/../read.py",
             "import sys, tempfile\n"
             "from torch_tb_profiler.profiler.data import RunProfileData\n"
             "from torch_tb_profiler.profiler.run_generator import RunGenerator\n"
             "data = RunProfileData.parse('rank0', None, sys.argv[1], tempfile.mkdtemp())\n"
             "profile = RunGenerator('rank0', None, data).generate_run_profile()\n"
             "print('steps', ','.join(row[0] for row in profile.overview['steps']['rows']))\n"
             "for op in profile.operation_table_by_name['data']:\n"
             "    print('op', op['name'], op['calls'], op['host_self_duration'])\n");
  const auto read =
      run_command(::trainyard::test::python() + " " + dir + "/../read.py " + dir + "/rank0.pt.trace.json");
  ASSERT_EQ(read.exit_code, 0) << read.out << read.err;
  EXPECT_TRUE(contains(read.out, "steps 4,5,6,7,8\n")) << read.out;
  std::istringstream lines(read.out);
  bool found = false;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string tag, name;
    int64_t tb_calls = 0;
    double tb_self_us = 0;
    if (!(fields >> tag >> name >> tb_calls >> tb_self_us) || name != "aten::addmm") continue;
    found = true;
    EXPECT_EQ(tb_calls, calls);
    EXPECT_NEAR(tb_self_us / 1000, self_ms, 0.002 + 0.02 * self_ms) << "microseconds rounded by the reader";
  }
  EXPECT_TRUE(found) << read.out;
  EXPECT_TRUE(contains(read.out, "op aten::mm ")) << "the backward's matrix products: " << read.out;
}

// Host syncs a single-process fp32 CPU step makes: with the update's checks
// read at every update (update_checks_every auto on the CPU, where a read
// costs nothing), one: the gradient norm with the losses' finiteness folded
// in (train/grad_norm.cpp); with them kept on the device between reads (a
// GPU's default, here every 16 updates), none. A log line reads the meters:
// the runs below log outside the recorded steps.
TEST(Profiler, TheSummaryCountsHostSyncsAndKernelLaunchesPerStep) {
  for (const auto& [setting, expected] : {std::pair<std::string, double>{"", 1}, {"16", 0}}) {
    const std::string name = "waits" + setting;
    const std::string exp = temp_dir("exp-profile-" + name) + "/" + name + ".yaml",
                      out = temp_dir("out-profile-" + name);
    // With the console's progress lines: it reads its losses when it prints, not at every step.
    write_file(exp, synthetic_experiment(name, "callbacks: [{plugin: console}]\n"));
    const auto r = trainyard("run " + exp + " --output-dir " + out + " --profile 3:8 --set loop.log_every_iters=16" +
                             (setting.empty() ? "" : " --set loop.update_checks_every=" + setting));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::string base = out + "/" + name + "/profile/rank0";
    const nlohmann::json counts = nlohmann::json::parse(read_file(base + ".profile_summary.json"));
    ASSERT_TRUE(counts.contains("host_syncs_per_step")) << counts.dump();
    EXPECT_EQ(counts["steps"], 5) << counts.dump();
    EXPECT_EQ(counts["iterations"], nlohmann::json::array({4, 8})) << counts.dump();
    // On the CPU: no kernels launched, and every host sync is an .item()
    // (aten::_local_scalar_dense), as many as the trace holds.
    EXPECT_EQ(counts["kernel_launches_per_step"], 0) << counts.dump();
    const int64_t items = occurrences(read_file(base + ".pt.trace.json"), "\"aten::_local_scalar_dense\"");
    const double per_step = counts["host_syncs_per_step"].get<double>();
    EXPECT_DOUBLE_EQ(per_step, items / 5.0) << counts.dump();
    EXPECT_EQ(counts["host_syncs_by_name"].size(), items > 0 ? 1u : 0u) << counts.dump();
    EXPECT_DOUBLE_EQ(per_step, expected) << setting << ": " << counts.dump();
    // The step split beside them adds up to the step.
    double split = 0;
    for (const auto& [phase, ms] : counts["step_split_ms"].items()) split += ms.get<double>();
    EXPECT_NEAR(split, counts["step_ms"].get<double>(), 0.001 * counts["step_split_ms"].size())
        << "each rounded to the microsecond: " << counts.dump();
    // The console's summary says the same.
    const std::string line = "per step: " + std::to_string(static_cast<int64_t>(per_step)) + " host syncs";
    EXPECT_TRUE(contains(r.out, line)) << line << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, " 0 kernel launches")) << r.out;
  }
}

TEST(Profiler, EachRankWritesItsTraceAndTheStepShowsTheRanksAgreement) {
  const std::string exp = temp_dir("exp-profile-dp") + "/dp.yaml", out = temp_dir("out-profile-dp");
  write_file(exp, synthetic_experiment("dp"));
  const auto r = trainyard("run " + exp + " --output-dir " + out + " --profile 2:5 --nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (int rank : {0, 1}) {
    const std::string base = out + "/dp/profile/rank" + std::to_string(rank);
    EXPECT_TRUE(std::filesystem::exists(base + ".pt.trace.json")) << base;
    const std::string summary = read_file(base + ".summary.txt");
    EXPECT_TRUE(contains(summary, "iterations 3-5: 3 steps recorded")) << summary;
    EXPECT_TRUE(contains(summary, " ranks ")) << "the per-step agreement and buffer broadcast: " << summary;
  }
}

TEST(Profiler, AWindowThatIsNotOneIsOneLine) {
  const std::string exp = temp_dir("exp-profile-bad") + "/bad.yaml", out = temp_dir("out-profile-bad");
  write_file(exp, synthetic_experiment("bad"));
  for (const std::string window : {"8:3", "x", "3:", "-1:4"}) {
    const auto r = trainyard("run " + exp + " --output-dir " + out + " --profile=" + window);
    EXPECT_EQ(r.exit_code, 2) << window;
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_TRUE(contains(r.err, "error: command line: --profile " + window + ": not a window")) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out + "/bad")) << "nothing written";
  }
}

}  // namespace
}  // namespace trainyard::test
