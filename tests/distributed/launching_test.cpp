// How ranks find each other, and what they are told when they cannot: the
// interface Gloo uses (two network namespaces joined by a veth pair), the
// shared output folder, rendezvous failures with their real causes, rank 0's
// slow writes, and torchrun's c10d rendezvous and elastic restarts.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "support/data_parallel.h"

namespace fs = std::filesystem;

namespace trainyard::test {
namespace {

std::string torchrun() { return (fs::path(::trainyard::test::python()).parent_path() / "torchrun").string(); }

// Starts one shell command per rank in the background and waits for all.
std::vector<CommandResult> run_ranks(const std::vector<std::string>& commands) {
  const std::string dir = temp_dir("ranks");
  std::string script;
  for (size_t r = 0; r < commands.size(); ++r) {
    const std::string n = std::to_string(r);
    script += "(" + commands[r] + " >" + dir + "/out" + n + " 2>" + dir + "/err" + n + "; echo $? >" + dir + "/rc" + n +
              ") &\n";
  }
  write_file(dir + "/launch.sh", script + "wait\n");
  run_command("bash " + dir + "/launch.sh");
  std::vector<CommandResult> results;
  for (size_t r = 0; r < commands.size(); ++r) {
    const std::string n = std::to_string(r);
    results.push_back(
        {std::stoi(read_file(dir + "/rc" + n)), read_file(dir + "/out" + n), read_file(dir + "/err" + n)});
  }
  return results;
}

std::string rank_env(int rank, int port, const std::string& master = "127.0.0.1") {
  return "RANK=" + std::to_string(rank) + " WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=" + master +
         " MASTER_PORT=" + std::to_string(port) + " ";
}

// Rank 1 in a network namespace of its own, joined to this one by a veth
// pair: 10.R.0.1 here, 10.R.0.2 there. In the namespace the host name still
// resolves to 127.0.0.1, which is what Gloo advertised before it took the
// route to rank 0.
class TwoNamespaces {
 public:
  TwoNamespaces() {
    const std::string id = std::to_string(::getpid() % 100000);
    ns_ = "ty" + id;
    here_ = "tyA" + id;
    there_ = "tyB" + id;
    subnet_ = "10." + std::to_string(100 + ::getpid() % 150) + ".0.";
    const CommandResult r =
        run_command("set -e; ip netns add " + ns_ + "; ip link add " + here_ + " type veth peer name " + there_ +
                    "; ip link set " + there_ + " netns " + ns_ + "; ip addr add " + subnet_ + "1/24 dev " + here_ +
                    "; ip link set " + here_ + " up; ip -n " + ns_ + " addr add " + subnet_ + "2/24 dev " + there_ +
                    "; ip -n " + ns_ + " link set " + there_ + " up; ip -n " + ns_ + " link set lo up");
    ok_ = r.exit_code == 0;
    error_ = r.err;
  }
  ~TwoNamespaces() { run_command("ip netns del " + ns_ + " 2>/dev/null; ip link del " + here_ + " 2>/dev/null"); }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  std::string inside() const { return "ip netns exec " + ns_ + " env "; }
  std::string address_here() const { return subnet_ + "1"; }
  std::string address_there() const { return subnet_ + "2"; }
  const std::string& interface_here() const { return here_; }
  const std::string& interface_there() const { return there_; }

 private:
  std::string ns_, here_, there_, subnet_, error_;
  bool ok_ = false;
};

TEST(Distributed, GlooTakesTheRouteToRankZeroOrTheNamedInterface) {
  if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  TwoNamespaces net;
  ASSERT_TRUE(net.ok()) << net.error();
  DpReference single;
  const std::string exp = dp_experiment("dp");
  const std::string master = net.address_here();
  // Without a choice: each rank binds the address of its route to rank 0.
  {
    const std::string out = temp_dir("route");
    const int port = free_port();
    const std::string args = " run " + exp + " --output-dir " + out + " --set loop.batch_per_device=32";
    auto results = run_ranks({rank_env(0, port, master) + trainyard_binary() + args,
                              net.inside() + rank_env(1, port, master) + trainyard_binary() + args});
    ASSERT_EQ(results[0].exit_code, 0) << results[0].err;
    ASSERT_EQ(results[1].exit_code, 0) << results[1].err;
    EXPECT_TRUE(contains(results[0].out, "Gloo on " + master + " (the route to " + master + ")")) << results[0].out;
    EXPECT_TRUE(contains(rank_log(out + "/dp", 1), "Gloo on " + net.address_there() + " (the route to " + master + ")"))
        << rank_log(out + "/dp", 1);
    expect_equal_to_single(out + "/dp", single);
  }
  // GLOO_SOCKET_IFNAME names the interface, as for torch.distributed.
  {
    const std::string out = temp_dir("ifname");
    const int port = free_port() + 1;
    const std::string args = " run " + exp + " --output-dir " + out + " --set loop.batch_per_device=32";
    auto results = run_ranks(
        {"GLOO_SOCKET_IFNAME=" + net.interface_here() + " " + rank_env(0, port, master) + trainyard_binary() + args,
         net.inside() + "GLOO_SOCKET_IFNAME=" + net.interface_there() + " " + rank_env(1, port, master) +
             trainyard_binary() + args});
    ASSERT_EQ(results[0].exit_code, 0) << results[0].err;
    ASSERT_EQ(results[1].exit_code, 0) << results[1].err;
    EXPECT_TRUE(contains(rank_log(out + "/dp", 1), "Gloo on " + net.interface_there() + " (GLOO_SOCKET_IFNAME)"))
        << rank_log(out + "/dp", 1);
    expect_equal_to_single(out + "/dp", single);
  }
  // TRAINYARD_GLOO_ADDRESS names the address itself.
  {
    const std::string out = temp_dir("address");
    const int port = free_port() + 4;
    const std::string args = " run " + exp + " --output-dir " + out + " --set loop.batch_per_device=32";
    auto results = run_ranks({rank_env(0, port, master) + trainyard_binary() + args,
                              net.inside() + "TRAINYARD_GLOO_ADDRESS=" + net.address_there() + " " +
                                  rank_env(1, port, master) + trainyard_binary() + args});
    ASSERT_EQ(results[0].exit_code, 0) << results[0].err;
    ASSERT_EQ(results[1].exit_code, 0) << results[1].err;
    EXPECT_TRUE(contains(rank_log(out + "/dp", 1), "Gloo on " + net.address_there() + " (TRAINYARD_GLOO_ADDRESS)"))
        << rank_log(out + "/dp", 1);
    expect_equal_to_single(out + "/dp", single);
  }
  // Both ranks on their loopback (what the host name resolves to, and what
  // Gloo took before): each advertises 127.0.0.1, which is not the other's.
  // The timeout also bounds the wait for the second rank to start (slower in
  // its namespace under a loaded CI): 8 s, not less.
  {
    const int port = free_port() + 3;
    const std::string args =
        " run " + exp + " --output-dir " + temp_dir("loopback") + " --set distributed.timeout_secs=8";
    auto results =
        run_ranks({"GLOO_SOCKET_IFNAME=lo " + rank_env(0, port, master) + trainyard_binary() + args,
                   net.inside() + "GLOO_SOCKET_IFNAME=lo " + rank_env(1, port, master) + trainyard_binary() + args});
    for (const auto& r : results) {
      EXPECT_EQ(r.exit_code, 1) << r.err;
      EXPECT_TRUE(contains(r.err, "reached the store but could not connect to the other ranks (Gloo on lo")) << r.err;
      EXPECT_TRUE(contains(r.err, "name the one the ranks share with GLOO_SOCKET_IFNAME")) << r.err;
    }
  }
  // An interface this machine does not have: one error line with the ones it has.
  auto r = trainyard_with_env("GLOO_SOCKET_IFNAME=eth9 " + rank_env(0, free_port() + 2),
                              "run " + exp + " --output-dir " + temp_dir("noif"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  ASSERT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(contains(r.err, "error: environment: GLOO_SOCKET_IFNAME='eth9': no interface 'eth9' on this machine"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "interfaces here: lo")) << r.err;
}

TEST(Distributed, RanksThatDoNotShareTheOutputFolderAreToldSo) {
  const std::string a = temp_dir("node-a"), b = temp_dir("node-b");
  auto results = launch_by_environment(dp_experiment("dp"), 2, {"--output-dir " + a, "--output-dir " + b});
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    ASSERT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_TRUE(contains(r.err, "error: output folder " + a + ": rank 1 does not see the folder rank 0 writes"))
        << r.err;
    EXPECT_TRUE(contains(r.err, "rank 0 left a token there; it found no .trainyard-shared-")) << r.err;
    EXPECT_TRUE(contains(r.err, " in " + b + ")")) << r.err;
    EXPECT_TRUE(contains(r.err, "expected one output folder shared by every rank")) << r.err;
  }
  // Nothing left behind: no run directory, no token.
  EXPECT_TRUE(fs::is_empty(a));
  EXPECT_TRUE(fs::is_empty(b));
}

TEST(Distributed, RendezvousFailuresNameTheirCause) {
  const std::string exp = dp_experiment("dp") + " --set distributed.timeout_secs=3";
  // A port another program holds.
  const int held = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = 0;
  ASSERT_EQ(::bind(held, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(held, 1), 0);
  socklen_t length = sizeof address;
  ::getsockname(held, reinterpret_cast<sockaddr*>(&address), &length);
  const int port = ntohs(address.sin_port);
  auto r = trainyard_with_env(rank_env(0, port), "run " + exp + " --output-dir " + temp_dir("held"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(
      r.err, "error: distributed: rank 0 cannot listen on port " + std::to_string(port) + ": the port is in use"))
      << r.err;
  ::close(held);
  // Nobody serves the store: rank 1 says where it looked.
  r = trainyard_with_env(rank_env(1, port), "run " + exp + " --output-dir " + temp_dir("alone"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "error: distributed rendezvous: rank 1 could not reach the store at 127.0.0.1:" +
                                  std::to_string(port) + " within 3 s"))
      << r.err;
  // Rank 0 alone: it says how many came.
  r = trainyard_with_env(rank_env(0, port), "run " + exp + " --output-dir " + temp_dir("lonely"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(
      contains(r.err, "error: distributed rendezvous: rank 0 waited 3 s (distributed.timeout_secs) at 127.0.0.1:" +
                          std::to_string(port) + " for the other ranks, who did not all come"))
      << r.err;

  // A rendezvous file left by a killed run.
  const std::string file = temp_dir("stale") + "/rendezvous";
  const std::string by_file = " --set distributed.rendezvous=file --set distributed.rendezvous_file=" + file +
                              " --set loop.batch_per_device=32 --plugin-dir " + fixture_dir("components");
  auto killed = launch_by_environment(dp_experiment("dp", "callbacks: [{plugin: die_at, iteration: 3, rank: 1}]\n") +
                                          by_file + " --output-dir " + temp_dir("killed"),
                                      2);
  ASSERT_EQ(killed[1].exit_code, 128 + 9);
  ASSERT_TRUE(fs::exists(file));
  auto again = launch_by_environment(dp_experiment("dp") + by_file + " --output-dir " + temp_dir("after"), 2);
  for (const auto& rank : again) {
    EXPECT_EQ(rank.exit_code, 2) << rank.err;
    EXPECT_TRUE(contains(rank.err, "error: distributed.rendezvous_file " + file + " holds an earlier run's rendezvous"))
        << rank.err;
    EXPECT_TRUE(contains(rank.err, "delete it before launching")) << rank.err;
  }
}

TEST(Distributed, RanksResumingFromDifferentCheckpointsNameBoth) {
  const std::string out = temp_dir("resume"), exp = dp_experiment("dp") + " --set loop.batch_per_device=32";
  ASSERT_EQ(trainyard("run " + exp + " --output-dir " + out + " --nproc-per-node 2").exit_code, 0);
  const std::string before = read_file(out + "/dp/metrics.jsonl");
  // Rank 1 told to start over while rank 0 resumes: which checkpoint each found.
  auto results = launch_by_environment(exp + " --output-dir " + out, 2, {"", "--fresh"});
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    ASSERT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_TRUE(
        contains(r.err, std::string("error: rank 1's checkpoint to resume from (none) differs from rank 0's (") +
                            kLastDpCheckpoint + ")"))
        << r.err;
  }
  EXPECT_EQ(read_file(out + "/dp/metrics.jsonl"), before);
}

TEST(Distributed, ASlowCheckpointWriteOnRankZeroIsNotALostRank) {
  // Rank 0 takes 4 s to write each checkpoint; collectives time out after 2 s.
  std::string exp = dp_experiment("dp");
  std::string yaml = read_file(exp);
  const std::string mlp = "network: {plugin: mlp, hidden_sizes: [32], dropout: 0.0}";
  ASSERT_NE(yaml.find(mlp), std::string::npos) << yaml;
  write_file(exp, yaml.replace(yaml.find(mlp), mlp.size(), "network: {plugin: slow_save, seconds: 4}"));
  exp += " --set distributed.timeout_secs=2";
  const std::string args = " --set loop.batch_per_device=32 --plugin-dir " + fixture_dir("components");
  auto r = trainyard("run " + exp + args + " --output-dir " + temp_dir("slow") + " --nproc-per-node 2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A write that fails on rank 0 stops the others with rank 0's reason.
  auto results = launch_by_environment(exp + args + " --set network.fail=true --output-dir " + temp_dir("fails"), 2);
  EXPECT_EQ(results[0].exit_code, 1) << results[0].err;
  EXPECT_TRUE(contains(results[0].err, "no space left on device")) << results[0].err;
  EXPECT_EQ(results[1].exit_code, 1) << results[1].err;
  EXPECT_TRUE(contains(results[1].err, "error: rank 0's checkpoint write failed: ")) << results[1].err;
  EXPECT_TRUE(contains(results[1].err, "no space left on device")) << results[1].err;
}

TEST(Distributed, TorchrunC10dRendezvousAndAnElasticRestartEqualOneProcess) {
  ASSERT_TRUE(fs::exists(torchrun())) << torchrun();
  DpReference single;
  const std::string worker = " --no-python " + trainyard_binary() + " run ";
  // c10d rendezvous at an endpoint, as on several nodes.
  const std::string out = temp_dir("c10d");
  auto r = run_command(torchrun() + " --nnodes 1 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:" +
                       std::to_string(free_port()) + " --rdzv-id c10d-test" + worker + dp_experiment("dp") +
                       " --output-dir " + out + " --set loop.batch_per_device=32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(rank_log(out + "/dp", 1), "rank 1 of 2 (launched by torchrun")) << r.out;
  expect_equal_to_single(out + "/dp", single);

  // --max-restarts 1: rank 1 is killed once at iteration 13; torchrun restarts
  // both, which resume from the checkpoint of iteration 10 and end bit-identical.
  const std::string dir = temp_dir("restart");
  const std::string every =
      " --set checkpoint.every_iters=5 --set loop.batch_per_device=32 --plugin-dir " + fixture_dir("components");
  ASSERT_EQ(trainyard("run " + dp_experiment("dp") + every + " --output-dir " + dir + "/straight --nproc-per-node 2")
                .exit_code,
            0);
  const std::string dying =
      dp_experiment("dp", "callbacks: [{plugin: die_at, iteration: 13, rank: 1, marker: " + dir + "/died}]\n");
  r = run_command(torchrun() + " --standalone --nproc-per-node 2 --max-restarts 1" + worker + dying + every +
                  " --output-dir " + dir + "/restarted");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir + "/died"));
  EXPECT_TRUE(contains(r.out + r.err, "trainyard: resuming from ")) << r.out << r.err;
  EXPECT_EQ(
      compare_checkpoint_networks(latest_checkpoint(dir + "/straight/dp"), latest_checkpoint(dir + "/restarted/dp")),
      "");
}

}  // namespace
}  // namespace trainyard::test
