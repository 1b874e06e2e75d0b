#include "cli/command_line.h"

#include <cstdlib>
#include <iostream>

#include "distributed/launcher.h"
#include "distributed/world.h"
#include "trainyard/error.h"
#include "run/session.h"
#include "trainyard/version.h"

namespace trainyard::host {
namespace {

const std::vector<std::string> kLauncherOptions = {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr",
                                                   "--master-port"};

// argv[1..] without the launcher's own options: what each worker runs.
std::vector<std::string> worker_arguments(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    bool launcher = false;
    for (const auto& o : kLauncherOptions) {
      if (a == o) launcher = true, ++i;  // skip its value too
      if (a.rfind(o + "=", 0) == 0) launcher = true;
    }
    if (!launcher) out.push_back(a);
  }
  return out;
}

}  // namespace

po::options_description plugin_options() {
  po::options_description d("plugin options");
  d.add_options()("plugin-dir", po::value<std::vector<std::string>>()->composing(),
                  "also load plugins from this folder (repeatable)");
  return d;
}

po::options_description experiment_options() {
  po::options_description d("experiment options");
  d.add_options()("set", po::value<std::vector<std::string>>()->composing(),
                  "override a key of the experiment: --set optimizer.lr=0.1 (repeatable)");
  return d;
}

po::options_description help_option() {
  po::options_description d("general");
  d.add_options()("help,h", "print this help")("version", "print the version")(
      "log-level", po::value<std::string>()->default_value("info"),
      "error, warning, info or debug (also TRAINYARD_LOG_LEVEL); other ranks than 0 print warnings and errors only");
  return d;
}

po::options_description launch_options() {
  po::options_description d("multi-process options (one process per device; Gloo on CPUs, NCCL on GPUs)");
  d.add_options()("nproc-per-node", ranged("nproc-per-node", 1, 1024), "start N worker processes on this machine")(
      "nnodes", ranged("nnodes", 1, 65536)->default_value(1), "machines taking part")(
      "node-rank", ranged("node-rank", 0, 65535)->default_value(0), "this machine's index, 0..nnodes-1")(
      "master-addr", po::value<std::string>()->default_value("127.0.0.1"), "address of node 0")(
      "master-port", ranged("master-port", 0, 65535)->default_value(0), "port on node 0 (0: a free port, one node only)");
  return d;
}

po::options_description experiment_command_options(const po::options_description& own, bool with_launcher) {
  po::options_description visible;
  visible.add(own);
  if (with_launcher) visible.add(launch_options());
  visible.add(experiment_options()).add(plugin_options()).add(help_option());
  return visible;
}

bool parse_command_line(int argc, char** argv, const std::string& usage, const po::options_description& visible,
                        const std::string& positional_name, po::variables_map& vm) {
  po::options_description all;
  all.add(visible);
  po::positional_options_description positional;
  if (!positional_name.empty()) {
    all.add_options()(positional_name.c_str(), po::value<std::string>(), positional_name.c_str());
    positional.add(positional_name.c_str(), 1);
  }
  try {
    po::store(po::command_line_parser(argc - 1, argv + 1).options(all).positional(positional).run(), vm);
    if (!vm.count("help") && !vm.count("version")) po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string("command line: ") + e.what(), "expected " + usage, "see trainyard " +
                      std::string(argv[1]) + " --help");
  }
  if (vm.count("help")) {
    std::cout << "usage: " << usage << "\n\n" << visible << "\n";
    return false;
  }
  if (vm.count("version")) {
    std::cout << "trainyard " << TRAINYARD_VERSION << " (SDK API " << sdk_api_version() << ", "
              << TRAINYARD_FINGERPRINT << ")\n";
    return false;
  }
  if (!positional_name.empty() && !vm.count(positional_name))
    throw ConfigError("command line: missing the " + positional_name, "expected " + usage,
                      positional_name == "experiment"
                          ? "e.g. trainyard " + std::string(argv[1]) + " experiments/fashion_mnist_mlp.yaml"
                          : "");
  return true;
}

Experiment load_experiment(const po::variables_map& vm, Registry& registry) {
  return load_experiment(vm["experiment"].as<std::string>(), many<std::string>(vm, "set"),
                         many<std::string>(vm, "plugin-dir"), registry);
}

std::optional<int> launch_if_asked(const po::variables_map& vm, const Experiment& e, int argc, char** argv) {
  // Who starts the ranks: one launcher, never two, never silently ignored.
  const bool flag = vm.count("nproc-per-node") > 0;
  const int devices = static_cast<int>(e.distributed.num_gpus > 0 ? e.distributed.num_gpus : e.distributed.num_cpus);
  const int wanted = flag ? vm["nproc-per-node"].as<int>() : devices;
  if (const char* world_size = std::getenv("WORLD_SIZE")) {
    // Started as a rank by torchrun or another launcher (ours strips its flags).
    if (flag)
      throw ConfigError("command line: --nproc-per-node " + std::to_string(wanted) +
                            " in a process already started as a rank (WORLD_SIZE=" + world_size + ")",
                        "expected one launcher to start the ranks: torchrun or --nproc-per-node, not both",
                        "drop --nproc-per-node; torchrun's own --nproc-per-node says how many ranks per node");
    return std::nullopt;
  }
  LaunchOptions launch;
  launch.nproc_per_node = wanted;
  launch.nnodes = vm["nnodes"].as<int>();
  launch.node_rank = vm["node-rank"].as<int>();
  launch.master_addr = vm["master-addr"].as<std::string>();
  launch.master_port = vm["master-port"].as<int>();
  if (const std::optional<SlurmStep> step = slurm_step()) {
    if (step->tasks > step->nodes) {
      // srun started several tasks on a node: they are the ranks.
      if (flag)
        throw ConfigError("command line: --nproc-per-node " + std::to_string(wanted) + " inside a Slurm step of " +
                              std::to_string(step->tasks) + " tasks on " + std::to_string(step->nodes) +
                              " node(s): srun already started the ranks",
                          "expected srun to start the ranks (srun -n N trainyard run ...) or one task per node "
                          "that starts them (srun --ntasks-per-node=1 trainyard run ... --nproc-per-node N)",
                          "drop --nproc-per-node, or run one task per node");
      return std::nullopt;
    }
    if (wanted <= 1) return std::nullopt;  // one rank per node: srun's tasks
    // One task per node, which starts the node's ranks: the nodes, this
    // node's place and rank 0's address come from Slurm unless given.
    if (vm["nnodes"].defaulted()) launch.nnodes = step->nodes;
    if (vm["node-rank"].defaulted()) launch.node_rank = step->node_id;
    if (launch.nnodes > 1 && vm["master-addr"].defaulted() && !step->first_host.empty())
      launch.master_addr = step->first_host;
    if (launch.nnodes > 1 && launch.master_port == 0 && step->job_id > 0) launch.master_port = slurm_port(step->job_id);
    std::cout << "trainyard: Slurm step of " << step->tasks << " task(s): starting " << wanted
              << " ranks on this node (node " << launch.node_rank << " of " << launch.nnodes << ")" << std::endl;
  } else if (!flag && devices <= 1) {
    return std::nullopt;
  }
  if (launch.nproc_per_node < 1 || launch.nnodes < 1 || launch.node_rank < 0 || launch.node_rank >= launch.nnodes)
    throw ConfigError("command line: --nproc-per-node " + std::to_string(launch.nproc_per_node) + ", --nnodes " +
                          std::to_string(launch.nnodes) + ", --node-rank " + std::to_string(launch.node_rank),
                      "expected N >= 1, M >= 1 and 0 <= R < M", "");
  if (launch.nnodes > 1 && launch.master_port == 0)
    throw ConfigError("command line: --nnodes " + std::to_string(launch.nnodes) + " without --master-port",
                      "expected the same --master-addr and --master-port on every node", "");
  return launch_workers(launch, worker_arguments(argc, argv));
}

}  // namespace trainyard::host
