#include "support/data_parallel.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <ctime>

namespace trainyard::test {

std::string dp_experiment(const std::string& name, const std::string& more) {
  std::string yaml = synthetic_experiment(name, more);
  auto replace = [&](const std::string& from, const std::string& to) {
    yaml.replace(yaml.find(from), from.size(), to);
  };
  replace("size: 512,", "size: 1280,");
  replace("dropout: 0.1", "dropout: 0.0");
  replace("loop: {epochs: 2, batch_per_device: 32, log_every_iters: 4}",
          "loop: {epochs: 1, batch_per_device: 64, log_every_iters: 4}");
  replace("distributed: {threads_per_process: 1}", "distributed: {threads_per_process: 1, timeout_secs: 20}");
  const std::string path = temp_dir("exp-" + name) + "/" + name + ".yaml";
  write_file(path, yaml);
  return path;
}

int free_port() { return 20000 + (::getpid() * 7 + int(std::time(nullptr))) % 20000; }

std::vector<CommandResult> launch_by_environment(const std::string& args, int world,
                                                 const std::vector<std::string>& extra) {
  const int port = free_port();
  const std::string dir = temp_dir("ranks");
  std::string script;
  for (int r = 0; r < world; ++r)
    script += "(RANK=" + std::to_string(r) + " WORLD_SIZE=" + std::to_string(world) +
              " LOCAL_RANK=" + std::to_string(r) + " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " +
              trainyard_binary() + " run " + args + " " + (r < int(extra.size()) ? extra[size_t(r)] : "") + " >" + dir +
              "/out" + std::to_string(r) + " 2>" + dir + "/err" + std::to_string(r) + "; echo $? >" + dir + "/rc" +
              std::to_string(r) + ") &\n";
  script += "wait\n";
  write_file(dir + "/launch.sh", script);
  run_command("bash " + dir + "/launch.sh");
  std::vector<CommandResult> results;
  for (int r = 0; r < world; ++r) {
    CommandResult c;
    c.exit_code = std::stoi(read_file(dir + "/rc" + std::to_string(r)));
    c.out = read_file(dir + "/out" + std::to_string(r));
    c.err = read_file(dir + "/err" + std::to_string(r));
    results.push_back(c);
  }
  return results;
}

std::vector<double> series(const std::string& metrics, const std::string& key) {
  std::vector<double> out;
  for (const auto& line : read_lines(metrics)) {
    auto at = line.find("\"" + key + "\": ");
    if (at != std::string::npos) out.push_back(std::stod(line.substr(at + key.size() + 4)));
  }
  return out;
}

DpReference::DpReference() {
  const std::string out = temp_dir("single");
  auto r = trainyard("run " + dp_experiment("dp") + " --output-dir " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  run_dir = out + "/dp";
}

void expect_equal_to_single(const std::string& run_dir, const DpReference& single) {
  const std::string last = std::string("/checkpoints/") + kLastDpCheckpoint;
  EXPECT_LT(max_checkpoint_difference(run_dir + last, single.run_dir + last), 1e-5);
  auto a = series(run_dir + "/metrics.jsonl", "train_loss"),
       b = series(single.run_dir + "/metrics.jsonl", "train_loss");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << i;
  // Test meters summed over both ranks' halves of the test set: the exact single-process value.
  EXPECT_EQ(series(run_dir + "/metrics.jsonl", "test_accuracy_top1"),
            series(single.run_dir + "/metrics.jsonl", "test_accuracy_top1"));
  EXPECT_NEAR(series(run_dir + "/metrics.jsonl", "test_loss").back(),
              series(single.run_dir + "/metrics.jsonl", "test_loss").back(), 1e-5);
}

}  // namespace trainyard::test
