#include "cli/command_line.h"

#include <cstdlib>
#include <iostream>

#include "run/experiment_file.h"
#include "trainyard/error.h"
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
                  "also load plugins from this folder (repeatable)")(
      "allow-insecure-plugins",
      "load plugin libraries and TorchScript files that others than you or root could change (also "
      "TRAINYARD_ALLOW_INSECURE_PLUGINS=1)");
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
      "master-port", ranged("master-port", 0, 65535)->default_value(0),
      "port on node 0 (0: a free port, one node only)");
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
    // Through the environment: plugins (a TorchScript network) and worker processes read it too.
    if (vm.count("allow-insecure-plugins")) ::setenv("TRAINYARD_ALLOW_INSECURE_PLUGINS", "1", 1);
  } catch (const po::error& e) {
    throw ConfigError(std::string("command line: ") + e.what(), "expected " + usage,
                      "see trainyard " + std::string(argv[1]) + " --help");
  }
  if (vm.count("help")) {
    std::cout << "usage: " << usage << "\n\n" << visible << "\n";
    return false;
  }
  if (vm.count("version")) {
    std::cout << "trainyard " << TRAINYARD_VERSION << " (SDK API " << sdk_api_version() << ", " << TRAINYARD_FINGERPRINT
              << ")\n";
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

LaunchRequest launch_request(const po::variables_map& vm, int argc, char** argv) {
  LaunchRequest request;
  request.nproc_per_node = maybe<int>(vm, "nproc-per-node");
  if (!vm["nnodes"].defaulted()) request.nnodes = vm["nnodes"].as<int>();
  if (!vm["node-rank"].defaulted()) request.node_rank = vm["node-rank"].as<int>();
  if (!vm["master-addr"].defaulted()) request.master_addr = vm["master-addr"].as<std::string>();
  request.master_port = vm["master-port"].as<int>();
  request.worker_arguments = worker_arguments(argc, argv);
  return request;
}

}  // namespace trainyard::host
