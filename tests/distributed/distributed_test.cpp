// Data-parallel training with real processes talking Gloo over loopback.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <torch/cuda.h>
#include <torch/serialize/input-archive.h>
#include <chrono>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "distributed/world.h"
#include "support/data_parallel.h"
#include "trainyard/error.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

std::string experiment(const std::string& name, const std::string& more = "") { return dp_experiment(name, more); }

std::string checkpoint(const std::string& run_dir, const std::string& name) { return run_dir + "/checkpoints/" + name; }

const char* kLast = kLastDpCheckpoint;

using Reference = DpReference;

TEST(Distributed, TwoRanksThroughTheLauncherEqualOneProcessWithTheSameGlobalBatch) {
  Reference single;
  const std::string out = temp_dir("two");
  auto r = trainyard("run " + experiment("dp") + " --output-dir " + out +
                     " --set loop.batch_per_device=32 --nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(
      contains(r.out, "[rank 0] trainyard: rank 0 of 2 (launched by trainyard --nproc-per-node; Gloo on 127.0.0.1)"))
      << r.out;
  // Rank 1 says nothing on the console but warnings and errors; its own log file has it all.
  EXPECT_FALSE(contains(r.out, "[rank 1] trainyard: ")) << r.out;
  EXPECT_TRUE(
      contains(rank_log(out + "/dp", 1), " info trainyard: rank 1 of 2 (launched by trainyard --nproc-per-node"))
      << rank_log(out + "/dp", 1);
  EXPECT_TRUE(contains(rank_log(out + "/dp", 0), " info trainyard: done: 1/1 epoch")) << rank_log(out + "/dp", 0);
  expect_equal_to_single(out + "/dp", single);
  EXPECT_TRUE(contains(read_file(out + "/dp/metrics.jsonl"), "\"comm_share\": "));
}

TEST(Distributed, FindLrUnderTheLauncherAveragesTheLossOverRanks) {
  // Two ranks of 32 see the same 64 samples per update as one process of 64:
  // the same losses at every rate, and one set of files written by rank 0.
  const std::string exp = experiment("lrf"), out = temp_dir("lrf");
  const std::string common = "find-lr " + exp + " --min-lr 1e-3 --max-lr 0.3 --num-runs 4 --iters-per-run 5";
  auto single = trainyard(common + " --set loop.batch_per_device=64 --output " + out + "/single");
  ASSERT_EQ(single.exit_code, 0) << single.err;
  auto two = trainyard(common + " --set loop.batch_per_device=32 --nproc-per-node 2 --output " + out + "/two");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_TRUE(contains(two.out, "[rank 0] find-lr: suggested learning rate")) << two.out;
  EXPECT_FALSE(contains(two.out, "[rank 1] find-lr: suggested")) << two.out;
  auto a = read_lines(out + "/single/lr_finder.csv"), b = read_lines(out + "/two/lr_finder.csv");
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  for (size_t i = 1; i < a.size(); ++i) {
    const double la = std::stod(a[i].substr(a[i].find(',') + 1)), lb = std::stod(b[i].substr(b[i].find(',') + 1));
    EXPECT_NEAR(la, lb, 1e-5 * std::max(1.0, std::abs(la))) << a[i] << " vs " << b[i];
  }
}

TEST(Distributed, SigtermToOneRankStopsBothAtTheSameIterationWithACheckpoint) {
  std::string yaml = read_file(experiment("sig"));
  yaml.replace(yaml.find("epochs: 1,"), 10, "epochs: 200,");
  const std::string exp = temp_dir("exp-sig-long") + "/sig.yaml", out = temp_dir("out"), dir = temp_dir("ranks");
  write_file(exp, yaml);
  const int port = free_port();
  std::string script;
  for (int r = 0; r < 2; ++r)
    script += "RANK=" + std::to_string(r) + " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(r) +
              " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " + trainyard_binary() + " run " + exp +
              " --output-dir " + out + " >" + dir + "/out" + std::to_string(r) + " 2>" + dir + "/err" +
              std::to_string(r) + " &\npid" + std::to_string(r) + "=$!\n";
  script += "for i in $(seq 500); do grep -q '\"phase\": \"train\"' " + out +
            "/sig/metrics.jsonl 2>/dev/null && break; sleep 0.02; done\n"
            "sleep 0.3\nkill -TERM $pid1\nwait $pid0; echo $? >" +
            dir + "/rc0\nwait $pid1; echo $? >" + dir + "/rc1\n";
  write_file(dir + "/launch.sh", script);
  run_command("bash " + dir + "/launch.sh");
  std::string stopped_at[2];
  for (int r = 0; r < 2; ++r) {
    const std::string rs = std::to_string(r);
    EXPECT_EQ(read_file(dir + "/rc" + rs), "4\n") << read_file(dir + "/err" + rs);
    const std::string o = rank_log(out + "/sig", r);  // rank 1 tells only its log file
    auto at = o.find("with a checkpoint at iteration ");
    ASSERT_NE(at, std::string::npos) << o;
    stopped_at[r] = o.substr(at + 31, o.find(';', at) - at - 31);
  }
  EXPECT_EQ(stopped_at[0], stopped_at[1]);
  EXPECT_TRUE(contains(read_file(dir + "/err1"), "stopping: SIGTERM at iteration")) << read_file(dir + "/err1");
  EXPECT_TRUE(contains(read_file(dir + "/err0"), "stopping: requested by another rank")) << read_file(dir + "/err0");
  bool found = false;
  for (const auto& f : fs::directory_iterator(out + "/sig/checkpoints"))
    found = found || contains(f.path().filename().string(),
                              "-i" + std::string(8 - stopped_at[0].size(), '0') + stopped_at[0] + ".pt");
  EXPECT_TRUE(found) << "no checkpoint at iteration " << stopped_at[0];
}

TEST(Distributed, AStallOnEveryRankNamesRankZerosWholeCheckpointAndSendsTheOthersToIt) {
  // Only rank 0 writes checkpoints: the other ranks' stall lines must not
  // claim that none was written (they never learn when one is whole).
  std::string yaml =
      read_file(experiment("stall", "plugin_dirs: [" + fixture_dir("misbehaving") +
                                        "]\ncallbacks: [{plugin: hang, hook: after_train_iter, at: 14}]\n"));
  const std::string loop = "loop: {epochs: 1, batch_per_device: 64, log_every_iters: 4}";
  yaml.replace(yaml.find(loop), loop.size(),
               "loop: {epochs: 2, batch_per_device: 64, log_every_iters: 4, stall_timeout_secs: 3}");
  const std::string exp = temp_dir("exp-stall-ranks") + "/stall.yaml", out = temp_dir("out");
  write_file(exp, yaml);
  const auto results = launch_by_environment(exp + " --output-dir " + out, 2);
  // 10 iterations an epoch on two ranks: iteration 14 is in epoch 2, after epoch 1's checkpoint.
  const std::string checkpoint = latest_checkpoint(out + "/stall");
  ASSERT_FALSE(checkpoint.empty()) << results[0].err;
  EXPECT_EQ(results[0].exit_code, 5) << results[0].err;
  EXPECT_TRUE(contains(results[0].err, "; the last checkpoint written, " + checkpoint + ", is whole"))
      << results[0].err;
  EXPECT_EQ(results[1].exit_code, 5) << results[1].err;
  EXPECT_TRUE(contains(results[1].err, "error: stalled: no progress for ")) << results[1].err;
  EXPECT_TRUE(contains(
      results[1].err, "; rank 0 writes the checkpoints: run the same command to resume from the last one it completed"))
      << results[1].err;
}

TEST(Distributed, TwoNodesByHandOnOneMachine) {
  Reference single;
  const std::string out = temp_dir("nodes"), dir = temp_dir("node-logs");
  const std::string common = "run " + experiment("dp") + " --output-dir " + out +
                             " --set loop.batch_per_device=32 --nproc-per-node 1 --nnodes 2 --master-addr 127.0.0.1" +
                             " --master-port " + std::to_string(free_port());
  write_file(dir + "/nodes.sh", "(" + trainyard_binary() + " " + common + " --node-rank 0 >" + dir +
                                    "/out0 2>&1; echo $? >" + dir + "/rc0) &\n(" + trainyard_binary() + " " + common +
                                    " --node-rank 1 >" + dir + "/out1 2>&1; echo $? >" + dir + "/rc1) &\nwait\n");
  run_command("bash " + dir + "/nodes.sh");
  ASSERT_EQ(read_file(dir + "/rc0"), "0\n") << read_file(dir + "/out0");
  ASSERT_EQ(read_file(dir + "/rc1"), "0\n") << read_file(dir + "/out1");
  EXPECT_TRUE(contains(rank_log(out + "/dp", 1), "trainyard: rank 1 of 2")) << read_file(dir + "/out1");
  expect_equal_to_single(out + "/dp", single);
  // Rank 1 logs to its own file; only rank 0 writes metrics.jsonl and checkpoints.
  EXPECT_TRUE(contains(read_file(out + "/dp/logs/rank-1.jsonl"), "\"phase\": \"test\""));
}

TEST(Distributed, SyncBatchNormEqualsOneProcessOnTheGlobalBatch) {
  // A convnet whose batch norm sees 32 samples per rank: synchronized, it
  // normalizes over the global 64 like the single process does.
  auto exp = [&](const std::string& name) {
    std::string yaml = read_file(experiment(name));
    yaml.replace(0, yaml.find('\n'), "name: bn");
    yaml.replace(yaml.find("{plugin: mlp, hidden_sizes: [32], dropout: 0.0}"),
                 std::string("{plugin: mlp, hidden_sizes: [32], dropout: 0.0}").size(),
                 "{plugin: convnet, channels: [4], dropout: 0.0, hidden: 0}");
    yaml.replace(yaml.find("shape: [1, 4, 4]"), 16, "shape: [1, 8, 8]");
    yaml.replace(yaml.find("shape: [1, 4, 4]"), 16, "shape: [1, 8, 8]");
    const std::string path = temp_dir("bn-exp-" + name) + "/bn.yaml";
    write_file(path, yaml);
    return path;
  };
  const std::string single = temp_dir("bn-single"), synced = temp_dir("bn-sync"), local = temp_dir("bn-local");
  ASSERT_EQ(trainyard("run " + exp("a") + " --output-dir " + single).exit_code, 0);
  auto r = trainyard("run " + exp("b") + " --output-dir " + synced +
                     " --set loop.batch_per_device=32 --set distributed.sync_batch_norm=true --nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = trainyard("run " + exp("c") + " --output-dir " + local + " --set loop.batch_per_device=32 --nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string file = "/bn/checkpoints/" + std::string(kLast);
  const double with_sync = max_checkpoint_difference(synced + file, single + file);
  const double without = max_checkpoint_difference(local + file, single + file);
  std::printf("max difference to one process: %g with sync batch norm, %g without\n", with_sync, without);
  EXPECT_LT(with_sync, 1e-4);  // parameters and running statistics
  EXPECT_GT(without, 100 * with_sync + 1e-4) << "per-rank batch norm should differ measurably";
}

TEST(Distributed, BatchNormBuffersFollowRankZeroSoTheReportedTestIsTheSavedModel) {
  // Batch norm without synchronization: each rank's running statistics would
  // drift on its own shard, rank 1 would test with its own and only rank 0's
  // are saved. Broadcast from rank 0 before each update and each test, the
  // run's reported test values are what its checkpoint gives in one process.
  std::string yaml = read_file(experiment("bnb"));
  yaml.replace(yaml.find("{plugin: mlp, hidden_sizes: [32], dropout: 0.0}"),
               std::string("{plugin: mlp, hidden_sizes: [32], dropout: 0.0}").size(),
               "{plugin: convnet, channels: [4], dropout: 0.0, hidden: 0}");
  for (int i = 0; i < 2; ++i) yaml.replace(yaml.find("shape: [1, 4, 4]"), 16, "shape: [1, 8, 8]");
  const std::string exp = temp_dir("bnb-exp") + "/bnb.yaml", out = temp_dir("bnb-out");
  write_file(exp, yaml);
  auto r = trainyard("run " + exp + " --output-dir " + out + " --set loop.batch_per_device=32 --nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto e = trainyard("eval " + exp + " --output-dir " + out + " --output " + out + "/eval.json");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const auto summary = nlohmann::json::parse(read_file(out + "/bnb/summary.json"));
  const auto eval = nlohmann::json::parse(read_file(out + "/eval.json"));
  for (const char* k : {"test_accuracy_top1", "test_loss"}) {
    const double ran = summary["metrics"][k], saved = eval["values"][k];
    std::printf("%s: %.9g in the run, %.9g from its checkpoint\n", k, ran, saved);
    EXPECT_NEAR(ran, saved, 1e-6 * std::abs(saved)) << k;  // sums over two ranks or one: rounding only
  }
}

TEST(Distributed, NumCpusInTheExperimentStartsThatManyProcesses) {
  Reference single;
  const std::string out = temp_dir("numcpus");
  auto r = trainyard("run " + experiment("dp") + " --output-dir " + out +
                     " --set loop.batch_per_device=32 --set distributed.num_cpus=2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(rank_log(out + "/dp", 1), "trainyard: rank 1 of 2")) << r.out;
  expect_equal_to_single(out + "/dp", single);
}

TEST(Distributed, AccumulationCommunicatesOnTheLastMicroStepAndEqualsOneBigBatch) {
  // 2 ranks x batch 16 x iter_size 2 = the single process's batch of 64.
  Reference single;
  const std::string out = temp_dir("accumulate");
  auto r = trainyard("run " + experiment("dp") + " --output-dir " + out +
                     " --set loop.batch_per_device=16 --set loop.iter_size=2 --nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(
      max_checkpoint_difference(checkpoint(out + "/dp", "ckpt-e0001-i00000040.pt"), checkpoint(single.run_dir, kLast)),
      1e-5);
}

TEST(Distributed, FileRendezvousGivesTheSameRun) {
  Reference single;
  const std::string out = temp_dir("file");
  auto r = trainyard("run " + experiment("dp") + " --output-dir " + out +
                     " --set loop.batch_per_device=32 --set distributed.rendezvous=file" +
                     " --set distributed.rendezvous_file=" + temp_dir("store") + "/rendezvous --nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_equal_to_single(out + "/dp", single);
}

TEST(Distributed, RanksLaunchedWithTheTorchrunEnvironment) {
  Reference single;
  const std::string out = temp_dir("env");
  auto results =
      launch_by_environment(experiment("dp") + " --output-dir " + out + " --set loop.batch_per_device=32", 2);
  for (const auto& r : results) ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(rank_log(out + "/dp", 1),
                       "rank 1 of 2 (launched by the RANK/WORLD_SIZE environment; Gloo on 127.0.0.1)"))
      << rank_log(out + "/dp", 1);
  expect_equal_to_single(out + "/dp", single);
}

// Slurm's environment, as srun sets it (no daemon needed for these).
TEST(SlurmEnvironment, TasksPerNodeAndNodeListsAreParsed) {
  using trainyard::host::first_slurm_host;
  using trainyard::host::slurm_tasks_per_node;
  EXPECT_EQ(slurm_tasks_per_node("2"), (std::vector<int>{2}));
  EXPECT_EQ(slurm_tasks_per_node("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(slurm_tasks_per_node("4,1(x2)"), (std::vector<int>{4, 1, 1}));
  EXPECT_THROW(slurm_tasks_per_node("2(x)"), ConfigError);
  EXPECT_THROW(slurm_tasks_per_node(""), ConfigError);
  EXPECT_EQ(first_slurm_host("localhost"), "localhost");
  EXPECT_EQ(first_slurm_host("node[01-03,07],gpu1"), "node01");
  EXPECT_EQ(first_slurm_host("gpu1,node[01-03]"), "gpu1");
  EXPECT_EQ(first_slurm_host("node[7,9-12]"), "node7");
  EXPECT_EQ(first_slurm_host("rack[1-2]-n[3-4]"), "rack1-n3");
  EXPECT_THROW(first_slurm_host("node[01-03"), ConfigError);
  EXPECT_THROW(first_slurm_host(""), ConfigError);
}

TEST(SlurmEnvironment, SrunWithoutTasksPerNodeStillSharesTheNodesCores) {
  // srun -N1 -n2 sets SLURM_TASKS_PER_NODE=2 but no SLURM_NTASKS_PER_NODE.
  const std::vector<std::pair<const char*, const char*>> env = {{"SLURM_STEP_ID", "0"},
                                                                {"SLURM_NTASKS", "2"},
                                                                {"SLURM_PROCID", "1"},
                                                                {"SLURM_LOCALID", "1"},
                                                                {"SLURM_NODEID", "0"},
                                                                {"SLURM_TASKS_PER_NODE", "2"},
                                                                {"SLURM_JOB_NODELIST", "node[07-08]"},
                                                                {"SLURM_JOB_ID", "123456"}};
  for (const auto& [k, v] : env) ::setenv(k, v, 1);
  for (const char* k :
       {"WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NODELIST",
        "SLURM_CPUS_PER_TASK", "TORCHELASTIC_USE_AGENT_STORE", "SLURM_STEP_NUM_TASKS", "SLURM_CPU_BIND_TYPE"})
    ::unsetenv(k);
  const trainyard::host::StoreSettings e;  // the distributed section's defaults
  const trainyard::host::World w = trainyard::host::detect_world(e);
  EXPECT_EQ(w.world_size, 2);
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.local_world_size, 2);
  EXPECT_EQ(w.master_addr, "node07");
  EXPECT_EQ(w.master_port, 20000 + 123456 % 20000);
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  EXPECT_EQ(trainyard::host::threads_for(w, 0), std::max(1, CPU_COUNT(&mask) / 2));  // this node's CPUs, shared by 2
  ::setenv("SLURM_CPUS_PER_TASK", "3", 1);
  EXPECT_EQ(trainyard::host::threads_for(trainyard::host::detect_world(e), 0), 3);
  EXPECT_EQ(trainyard::host::threads_for(trainyard::host::detect_world(e), 5), 5);  // the experiment's setting wins
  // Bound by Slurm to CPUs of its own (task/affinity): the whole mask is this task's.
  ::unsetenv("SLURM_CPUS_PER_TASK");
  ::setenv("SLURM_CPU_BIND_TYPE", "mask_cpu:", 1);
  EXPECT_EQ(trainyard::host::threads_for(trainyard::host::detect_world(e), 0), CPU_COUNT(&mask));
  ::unsetenv("SLURM_CPU_BIND_TYPE");
  // The job's batch script (no srun step) is not a rank of the job's 2 tasks.
  ::unsetenv("SLURM_STEP_ID");
  try {
    trainyard::host::detect_world(e);
    ADD_FAILURE() << "a batch script of a 2-task job was taken for a rank";
  } catch (const ConfigError& err) {
    EXPECT_TRUE(contains(err.what(), "Slurm job 123456 has 2 tasks, but this process was not started by srun"))
        << err.what();
    EXPECT_TRUE(contains(err.what(), "`srun trainyard run EXPERIMENT`")) << err.what();
  }
  for (const auto& [k, v] : env) ::unsetenv(k);
}

// torchrun from the PyTorch the build uses, next to its Python.
std::string torchrun() { return (fs::path(::trainyard::test::python()).parent_path() / "torchrun").string(); }

TEST(Distributed, TorchrunStaticAndStandaloneModesEqualOneProcess) {
  ASSERT_TRUE(fs::exists(torchrun())) << torchrun();
  Reference single;
  // The default (static) rendezvous: the agent serves the store at
  // MASTER_PORT and says so (TORCHELASTIC_USE_AGENT_STORE=True); --standalone:
  // c10d rendezvous on a port of its own.
  for (const std::string& mode : {"--master-port " + std::to_string(free_port()), std::string("--standalone")}) {
    const std::string out = temp_dir("torchrun");
    auto r = run_command(torchrun() + " --nproc-per-node 2 " + mode + " --no-python " + trainyard_binary() + " run " +
                         experiment("dp") + " --output-dir " + out + " --set loop.batch_per_device=32");
    ASSERT_EQ(r.exit_code, 0) << mode << ": " << r.err;
    EXPECT_TRUE(contains(rank_log(out + "/dp", 1), "rank 1 of 2 (launched by torchrun;")) << mode << ": " << r.out;
    expect_equal_to_single(out + "/dp", single);
  }
}

TEST(Distributed, MismatchedPluginSetsAreRefused) {
  const std::string out = temp_dir("mismatch");
  auto results = launch_by_environment(experiment("dp") + " --output-dir " + out, 2,
                                       {"", "--plugin-dir " + fixture_dir("components")});
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "error: rank 1's plugin set differs from rank 0's")) << r.err;
  }
  EXPECT_FALSE(fs::exists(out + "/dp/checkpoints"));
}

TEST(Distributed, AKilledWorkerStopsTheOthersAndIsNamed) {
  const std::string exp = experiment("dp", "callbacks: [{plugin: die_at, iteration: 5, rank: 1}]\n");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = trainyard("run " + exp + " --output-dir " + temp_dir("kill") + " --plugin-dir " + fixture_dir("components") +
                     " --set loop.batch_per_device=32 --nproc-per-node 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "error: rank 1 (pid ")) << r.err;
  EXPECT_TRUE(contains(r.err, ") was killed by SIGKILL; stopping the other ranks")) << r.err;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
  // Without the launcher: rank 0 notices on its own, within the timeout.
  const auto t1 = std::chrono::steady_clock::now();
  auto results = launch_by_environment(exp + " --output-dir " + temp_dir("kill-env") + " --plugin-dir " +
                                           fixture_dir("components") + " --set loop.batch_per_device=32",
                                       2);
  EXPECT_EQ(results[1].exit_code, 128 + 9);
  EXPECT_EQ(results[0].exit_code, 1) << results[0].err;
  EXPECT_TRUE(contains(results[0].err, "failed: another rank died, hung or could not be reached")) << results[0].err;
  EXPECT_TRUE(contains(results[0].err, "; rank 1 stopped answering")) << results[0].err;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), 25.0);
}

TEST(Distributed, TheSharedGpuTestSettingLeavesCpuRanksAloneAndGpuRanksStillNeedAGpu) {
  // TRAINYARD_TEST_SHARED_GPU=1 (docs/distributed.md) only changes GPU runs:
  // CPU ranks keep their plain Gloo group and say nothing of sharing a GPU.
  const std::string out = temp_dir("shared-cpu");
  auto r = trainyard_with_env("TRAINYARD_TEST_SHARED_GPU=1", "run " + experiment("dp") + " --output-dir " + out +
                                                                 " --set loop.batch_per_device=32 --nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(
      contains(r.out, "[rank 0] trainyard: rank 0 of 2 (launched by trainyard --nproc-per-node; Gloo on 127.0.0.1)"))
      << r.out;
  EXPECT_FALSE(contains(r.out + rank_log(out + "/dp", 1), "TRAINYARD_TEST_SHARED_GPU")) << r.out;
  // Ranks asking for GPUs on a machine without one get the same one-line refusal as without the setting.
  if (torch::cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  for (const std::string env : {"TRAINYARD_TEST_SHARED_GPU=1", "TRAINYARD_TEST_SHARED_GPU=0"}) {
    auto g = trainyard_with_env(
        env, "run " + experiment("dp") + " --output-dir " + temp_dir("shared-gpu") + " --set distributed.num_gpus=2");
    EXPECT_EQ(g.exit_code, 2) << env << ": " << g.err;
    EXPECT_TRUE(contains(g.err, "distributed.num_gpus: GPUs requested but this ")) << env << ": " << g.err;
    EXPECT_FALSE(contains(g.err, "TRAINYARD_TEST_SHARED_GPU")) << env << ": " << g.err;
  }
}

TEST(Distributed, InterruptedAndResumedEqualsUninterrupted) {
  const std::string straight = temp_dir("straight"), split = temp_dir("split");
  const std::string args = " --set loop.batch_per_device=32 --plugin-dir " + fixture_dir("components");
  ASSERT_EQ(trainyard("run " + experiment("dp") + " --output-dir " + straight + args + " --nproc-per-node 2").exit_code,
            0);
  auto r = trainyard("run " + experiment("dp", "callbacks: [{plugin: stop_at, iteration: 9}]\n") + " --output-dir " +
                     split + args + " --nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(split + "/dp/checkpoints/ckpt-e0000-i00000009.pt"));
  r = trainyard("run " + experiment("dp") + " --output-dir " + split + args + " --nproc-per-node 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "[rank 0] trainyard: resuming from")) << r.out;
  EXPECT_TRUE(contains(rank_log(split + "/dp", 1), "trainyard: resuming from")) << rank_log(split + "/dp", 1);
  EXPECT_EQ(compare_checkpoint_networks(checkpoint(straight + "/dp", kLast), checkpoint(split + "/dp", kLast)), "");
}

}  // namespace
}  // namespace trainyard::test
