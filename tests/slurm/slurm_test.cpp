// Launching through a real single-node Slurm cluster (slurmctld, slurmd and
// munged from Debian, started for each test by tests/slurm/cluster.sh and
// stopped by PID): srun, sbatch, scancel and --nproc-per-node inside a step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "support/data_parallel.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

std::string cluster_script() { return source_dir() + "/tests/slurm/cluster.sh"; }

class Slurm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;  // slurmd starts jobs as their users: root only
    cluster_dir_ = new std::string(temp_dir("slurm-cluster"));
    const CommandResult r = run_command("bash " + cluster_script() + " start " + *cluster_dir_);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    ::setenv("SLURM_CONF", (*cluster_dir_ + "/slurm.conf").c_str(), 1);
  }
  static void TearDownTestSuite() {
    if (!cluster_dir_) return;
    run_command("bash " + cluster_script() + " stop " + *cluster_dir_);
    ::unsetenv("SLURM_CONF");
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "a Slurm cluster on this machine needs root (slurmd)";
  }
  static std::string* cluster_dir_;
};
std::string* Slurm::cluster_dir_ = nullptr;

// What every test trains: dp_experiment with 2 ranks of 32.
std::string run_args(const std::string& exp, const std::string& out) {
  return trainyard_binary() + " run " + exp + " --output-dir " + out + " --set loop.batch_per_device=32";
}

TEST_F(Slurm, SrunTwoTasksEqualOneProcessAndShareTheCores) {
  DpReference single;
  const std::string out = temp_dir("srun");
  const CommandResult r = run_command("srun -n2 " + run_args(dp_experiment("dp"), out));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "trainyard: rank 0 of 2 (launched by Slurm;")) << r.out;
  EXPECT_TRUE(contains(rank_log(out + "/dp", 1), "trainyard: rank 1 of 2 (launched by Slurm;"))
      << rank_log(out + "/dp", 1);
  expect_equal_to_single(out + "/dp", single);
}

TEST_F(Slurm, ThreadsComeFromTheCpusSlurmGivesEachTask) {
  // No threads_per_process: srun -n2 binds each task to one of the 2 cores;
  // -c2 on one task gives it both.
  std::string exp = dp_experiment("dp");
  write_file(exp, std::string(read_file(exp)).replace(read_file(exp).find("threads_per_process: 1, "), 24, ""));
  const std::string two_dir = temp_dir("threads2");
  auto two = run_command("srun -n2 " + run_args(exp, two_dir));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  for (int rank : {0, 1})
    EXPECT_TRUE(contains(rank_log(two_dir + "/dp", rank), "), 1 thread, run directory"))
        << rank_log(two_dir + "/dp", rank);
  auto one = run_command("srun -n1 -c2 " + run_args(exp, temp_dir("threads1")));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_TRUE(contains(one.out, "), 2 threads, run directory")) << one.out;
}

TEST_F(Slurm, SbatchStartsTheRanksThroughSrunOnly) {
  DpReference single;
  const std::string dir = temp_dir("sbatch"), exp = dp_experiment("dp");
  write_file(dir + "/job.sh", "#!/bin/bash\nsrun " + run_args(exp, dir + "/out") + "\n");
  auto r = run_command("sbatch --wait -n2 -o " + dir + "/job.log " + dir + "/job.sh");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << read_file(dir + "/job.log");
  expect_equal_to_single(dir + "/out/dp", single);
  // Without srun the batch script is one process, not the job's 2 ranks: refused at once, nothing written.
  write_file(dir + "/bare.sh", "#!/bin/bash\n" + run_args(exp, dir + "/bare") + "\n");
  r = run_command("sbatch --wait -n2 -o " + dir + "/bare.log " + dir + "/bare.sh");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  const std::string log = read_file(dir + "/bare.log");
  ASSERT_EQ(nonempty_lines(log).size(), 1u) << log;
  EXPECT_TRUE(contains(log, "error: Slurm job ")) << log;
  EXPECT_TRUE(contains(log, " has 2 tasks, but this process was not started by srun")) << log;
  EXPECT_FALSE(fs::exists(dir + "/bare"));
}

TEST_F(Slurm, NprocPerNodeInsideAnAllocation) {
  DpReference single;
  const std::string exp = dp_experiment("dp");
  // One task that starts the node's ranks: the explicit flag is obeyed.
  const std::string out = temp_dir("nproc");
  auto r = run_command("srun -n1 -c2 " + run_args(exp, out) + " --nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "trainyard: Slurm step of 1 task(s): starting 2 ranks on this node (node 0 of 1)"))
      << r.out;
  EXPECT_TRUE(contains(rank_log(out + "/dp", 1), "trainyard: rank 1 of 2 (launched by trainyard --nproc-per-node;"))
      << rank_log(out + "/dp", 1);
  expect_equal_to_single(out + "/dp", single);
  // srun already started 2 ranks: a second launcher is an error that says why.
  const std::string twice = temp_dir("nproc-twice");
  r = run_command("srun -n2 " + run_args(exp, twice) + " --nproc-per-node 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err,
                       "error: command line: --nproc-per-node 2 inside a Slurm step of 2 tasks on 1 node(s): "
                       "srun already started the ranks"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "Exited with exit code 2")) << r.err;
  EXPECT_FALSE(fs::exists(twice + "/dp"));
}

TEST_F(Slurm, ScancelCheckpointsExitsFourAndAResubmitEndsBitIdentical) {
  // Long enough to be cancelled in the middle: 1250 steps of 2 x 32.
  const std::string exp = dp_experiment("dp");
  write_file(exp, std::string(read_file(exp)).replace(read_file(exp).find("size: 1280,"), 11, "size: 80000,"));
  const std::string dir = temp_dir("scancel");
  ASSERT_EQ(run_command("srun -n2 " + run_args(exp, dir + "/straight")).exit_code, 0);

  write_file(dir + "/job.sh", "#!/bin/bash\nsrun " + run_args(exp, dir + "/split") + "\n");
  auto submitted = run_command("sbatch --parsable -n2 -o " + dir + "/first.log " + dir + "/job.sh");
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string job = nonempty_lines(submitted.out).at(0);
  // Cancel once training has logged a few times.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (read_lines(dir + "/split/dp/metrics.jsonl").size() < 5 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(run_command("scancel " + job).exit_code, 0);
  while (run_command("squeue -h -j " + job).out.find(job) != std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string first = read_file(dir + "/first.log");
  EXPECT_TRUE(contains(first, "stopped by a signal with a checkpoint at iteration")) << first;
  // srun reports "tasks 0-1: Exited with exit code 4", or each task apart when they end further apart.
  EXPECT_TRUE(
      contains(first, "tasks 0-1: Exited with exit code 4") ||
      (contains(first, "task 0: Exited with exit code 4") && contains(first, "task 1: Exited with exit code 4")))
      << first;
  const std::string stopped_at = latest_checkpoint(dir + "/split/dp");
  ASSERT_NE(stopped_at, "");
  ASSERT_NE(fs::path(stopped_at).filename(), fs::path(latest_checkpoint(dir + "/straight/dp")).filename())
      << "the run ended before scancel";

  // The same job again resumes and ends where the uninterrupted run did, bit for bit.
  auto again = run_command("sbatch --wait -n2 -o " + dir + "/second.log " + dir + "/job.sh");
  ASSERT_EQ(again.exit_code, 0) << read_file(dir + "/second.log");
  EXPECT_TRUE(contains(read_file(dir + "/second.log"), "trainyard: resuming from ")) << read_file(dir + "/second.log");
  const std::string straight = latest_checkpoint(dir + "/straight/dp"), split = latest_checkpoint(dir + "/split/dp");
  ASSERT_EQ(fs::path(straight).filename(), fs::path(split).filename());
  EXPECT_EQ(compare_checkpoint_networks(straight, split), "");
}

}  // namespace
}  // namespace trainyard::test
