// One run per run directory (run/run_lock.h): real processes into one
// output folder, a killed holder, a requeued Slurm job's earlier step, and
// the lock file's records as another machine would leave them.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>

#include "formats/metrics.h"
#include "run/run_lock.h"
#include "support/support.h"
#include "trainyard/error.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

// The demo (Fashion-MNIST, the MLP) cut to a few seconds: long enough for a
// second run to start while the first one trains.
std::string demo_args(const std::string& out, int epochs) {
  return "run " + source_dir() +
         "/experiments/fashion_mnist_mlp.yaml --set dataset.train.limit=3000 "
         "--set dataset.test.limit=500 --set loop.epochs=" +
         std::to_string(epochs) + " --output-dir " + out;
}

struct TwoRuns {
  CommandResult first, second;
  long first_pid = 0;
};

// Starts `first` in the background, waits until `started` exists, runs
// `second` to its end, then waits for the first (or sends it `signal` first).
// With `signal`, the first run gets it once the second says `waiting` (an
// event, not a delay: on a busy machine the second may take seconds to start).
TwoRuns overlapping(const std::string& first, const std::string& started, const std::string& second,
                    const std::string& signal = "", const std::string& environment = "",
                    const std::string& waiting = "") {
  const std::string dir = temp_dir("overlap");
  const std::string bin = trainyard_binary();
  const std::string second_run = environment + bin + " " + second + " >" + dir + "/out2 2>" + dir + "/err2";
  write_file(dir + "/run.sh", environment + bin + " " + first + " >" + dir + "/out1 2>" + dir +
                                  "/err1 &\n"
                                  "pid=$!\necho $pid >" +
                                  dir +
                                  "/pid\n"
                                  "for i in $(seq 15000); do [ -s " +
                                  started + " ] && break; sleep 0.02; done\n" +
                                  (signal.empty() ? second_run + "\necho $? >" + dir + "/rc2\n"
                                                  : second_run +
                                                        " &\nsecond=$!\n"
                                                        "for i in $(seq 15000); do grep -qF '" +
                                                        waiting + "' " + dir +
                                                        "/out2 2>/dev/null && break; "
                                                        "kill -0 $second 2>/dev/null || break; sleep 0.02; done\n"
                                                        "kill -" +
                                                        signal + " $pid\nwait $second\necho $? >" + dir + "/rc2\n") +
                                  "wait $pid\necho $? >" + dir + "/rc1\n");
  run_command("bash " + dir + "/run.sh");
  TwoRuns r;
  r.first = {std::stoi(read_file(dir + "/rc1")), read_file(dir + "/out1"), read_file(dir + "/err1")};
  r.second = {std::stoi(read_file(dir + "/rc2")), read_file(dir + "/out2"), read_file(dir + "/err2")};
  r.first_pid = std::stol(read_file(dir + "/pid"));
  return r;
}

// Test events per epoch in metrics.jsonl: each epoch's once when one run wrote it.
std::map<int64_t, int> test_events_per_epoch(const std::string& metrics) {
  std::map<int64_t, int> count;
  for (const auto& e : host::read_events(metrics))
    if (e.phase == "test") ++count[e.epoch];
  return count;
}

TEST(RunLock, ASecondRunIntoABusyRunDirectoryIsRefusedAndTheFirstKeepsItsMetrics) {
  const std::string out = temp_dir("busy"), run_dir = out + "/fashion_mnist_mlp";
  const TwoRuns r = overlapping(demo_args(out, 12), run_dir + "/metrics.jsonl", demo_args(out, 12));
  EXPECT_EQ(r.second.exit_code, 2) << r.second.out << r.second.err;
  const auto lines = nonempty_lines(r.second.err);
  ASSERT_EQ(lines.size(), 1u) << r.second.err;
  EXPECT_TRUE(contains(lines[0], "error: " + run_dir + ": another run is using this run directory (host ")) << lines[0];
  EXPECT_TRUE(contains(lines[0], "PID " + std::to_string(r.first_pid) + ", since ")) << lines[0];
  EXPECT_TRUE(contains(lines[0], "lock file " + run_dir + ".lock")) << lines[0];
  EXPECT_TRUE(contains(lines[0], "give this run another --output-dir or name")) << lines[0];
  EXPECT_FALSE(contains(r.second.out, "resuming from")) << r.second.out;
  // The first run trained on, alone: every epoch tested once, then the lock released.
  ASSERT_EQ(r.first.exit_code, 0) << r.first.err;
  const auto events = test_events_per_epoch(run_dir + "/metrics.jsonl");
  EXPECT_EQ(events.size(), 12u);
  for (const auto& [epoch, n] : events) EXPECT_EQ(n, 1) << "epoch " << epoch;
  EXPECT_FALSE(fs::exists(run_dir + ".lock"));
}

TEST(RunLock, AKilledHoldersLockIsTakenOverWithAWarningAndTheRunResumes) {
  const std::string out = temp_dir("killed"), run_dir = out + "/fashion_mnist_mlp";
  const std::string args = demo_args(out, 40) + " --set checkpoint.every_iters=20";
  const CommandResult killed = interrupted(args, run_dir + "/metrics.jsonl", 500, "KILL");
  ASSERT_EQ(killed.exit_code, 137) << killed.err;
  // The kernel released its flock; its record stays behind.
  const host::LockHolder left = host::read_lock_holder(run_dir + ".lock");
  ASSERT_GT(left.pid, 0);
  const CommandResult again = trainyard(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(contains(again.err, "warning: " + run_dir +
                                      ".lock: taking over the lock of a run that ended without "
                                      "releasing it (host " +
                                      left.host + ", PID " + std::to_string(left.pid)))
      << again.err;
  EXPECT_TRUE(contains(again.out, "resuming from ")) << again.out;
  EXPECT_FALSE(fs::exists(run_dir + ".lock"));
}

TEST(RunLock, ARequeuedSlurmJobWaitsForItsEarlierStepToEnd) {
  // A requeue runs the same job id again; its earlier step may still be
  // writing its stop checkpoint (SIGTERM, then exit 4). The new one waits
  // for it, then resumes: nothing trained twice.
  const std::string out = temp_dir("requeue"), run_dir = out + "/fashion_mnist_mlp";
  const TwoRuns r = overlapping(demo_args(out, 200), run_dir + "/metrics.jsonl", demo_args(out, 3), "TERM",
                                "SLURM_JOB_ID=424242 TRAINYARD_RUN_LOCK_WAIT=120 ", "held by an earlier step");
  EXPECT_EQ(r.first.exit_code, 4) << r.first.err;
  ASSERT_EQ(r.second.exit_code, 0) << r.second.out << r.second.err;
  EXPECT_TRUE(contains(r.second.out, run_dir + ".lock is held by an earlier step of Slurm job 424242 (host "))
      << r.second.out;
  EXPECT_TRUE(contains(r.second.out, "resuming from ")) << r.second.out;
  for (const auto& [epoch, n] : test_events_per_epoch(run_dir + "/metrics.jsonl")) EXPECT_EQ(n, 1) << "epoch " << epoch;
}

TEST(RunLock, AnotherJobIsRefusedAtOnceEvenWhenBothRunUnderSlurm) {
  const std::string dir = temp_dir("lock-jobs"), run_dir = dir + "/runs/x";
  fs::create_directories(dir + "/runs");
  ::setenv("SLURM_JOB_ID", "11", 1);
  auto held = host::RunLock::acquire(run_dir);
  ::setenv("SLURM_JOB_ID", "12", 1);
  const auto started = std::chrono::steady_clock::now();
  try {
    host::RunLock::acquire(run_dir);
    ADD_FAILURE() << "a second lock of the same run directory was granted";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "PID " + std::to_string(::getpid()) + ", since ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "Slurm job 11; lock file")) << e.what();
  }
  ::unsetenv("SLURM_JOB_ID");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  held.reset();
  EXPECT_FALSE(fs::exists(run_dir + ".lock"));
  EXPECT_TRUE(fs::is_directory(dir + "/runs"));  // it existed before the lock
}

TEST(RunLock, ALinkOrSpecialFilePlantedAsTheLockIsRefusedAndItsTargetUntouched) {
  const std::string dir = temp_dir("lock-planted"), run_dir = dir + "/x", lock = run_dir + ".lock";
  const std::string victim = dir + "/victim.txt";
  write_file(victim, "someone else's file\n");
  auto refusal = [&] {
    try {
      host::RunLock::acquire(run_dir);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("granted");
  };
  fs::create_symlink(victim, lock);
  EXPECT_TRUE(contains(refusal(), lock + ": the run lock is a symbolic link (to " + victim + ")")) << refusal();
  EXPECT_EQ(read_file(victim), "someone else's file\n");
  fs::remove(lock);
  fs::create_symlink(dir + "/not-yet", lock);  // dangling: following it would create the target
  EXPECT_TRUE(contains(refusal(), "the run lock is a symbolic link")) << refusal();
  EXPECT_FALSE(fs::exists(dir + "/not-yet"));
  fs::remove(lock);
  fs::create_hard_link(victim, lock);
  EXPECT_TRUE(contains(refusal(), lock + ": the run lock has 2 hard links")) << refusal();
  EXPECT_EQ(read_file(victim), "someone else's file\n");
  fs::remove(lock);
  ASSERT_EQ(::mkfifo(lock.c_str(), 0600), 0);
  EXPECT_TRUE(contains(refusal(), lock + ": the run lock is not a regular file (a FIFO)")) << refusal();
  fs::remove(lock);
  EXPECT_EQ(refusal(), "granted");  // a plain run directory still locks
}

TEST(RunLock, AFolderMadeOnlyForTheLockGoesWithIt) {
  const std::string dir = temp_dir("lock-folder");
  host::RunLock::acquire(dir + "/new/deeper/x").reset();
  EXPECT_FALSE(fs::exists(dir + "/new"));
}

// A record as another machine leaves it on a shared file system whose flock
// this machine cannot see: alive while its heartbeat is fresh.
void write_foreign_record(const std::string& lock, std::time_t heartbeat) {
  write_file(lock,
             "{\"host\": \"node-17.cluster\", \"pid\": 4321, \"started\": \"2026-11-25T08:00:00Z\", "
             "\"job\": \"Slurm job 77\", \"command\": \"trainyard run x.yaml\"}\n");
  const struct utimbuf times { heartbeat, heartbeat };
  ASSERT_EQ(::utime(lock.c_str(), &times), 0);
}

TEST(RunLock, AnotherMachinesRecordCountsWhileItsHeartbeatIsFresh) {
  const std::string dir = temp_dir("lock-nfs"), run_dir = dir + "/x", lock = run_dir + ".lock";
  write_foreign_record(lock, std::time(nullptr) - 5);
  try {
    host::RunLock::acquire(run_dir);
    ADD_FAILURE() << "a lock with a fresh heartbeat from another machine was taken";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(),
                         "host node-17.cluster, PID 4321, since 2026-11-25T08:00:00Z, Slurm job 77; its "
                         "heartbeat is "))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "cannot see that machine's lock (a network file system)")) << e.what();
  }
  // Silent for longer than stale_after: that machine's run is gone.
  write_foreign_record(lock, std::time(nullptr) - 600);
  auto taken = host::RunLock::acquire(run_dir);
  EXPECT_EQ(host::read_lock_holder(lock).pid, static_cast<long>(::getpid()));
}

}  // namespace
}  // namespace trainyard::test
