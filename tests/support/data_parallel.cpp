#include "support/data_parallel.h"

#include <unistd.h>

#include <ctime>

namespace trainyard::test {

std::string dp_experiment(const std::string& name, const std::string& more) {
  std::string yaml = synthetic_experiment(name, more);
  auto replace = [&](const std::string& from, const std::string& to) { yaml.replace(yaml.find(from), from.size(), to); };
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
    script += "(RANK=" + std::to_string(r) + " WORLD_SIZE=" + std::to_string(world) + " LOCAL_RANK=" +
              std::to_string(r) + " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " +
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

}  // namespace trainyard::test
