// The command table: `trainyard COMMAND ...` to its adapter, and exceptions
// to exit codes.
#include "cli/commands.h"

#include <cstdlib>

#include <iostream>
#include <map>

#include <c10/util/Exception.h>
#include <torch/version.h>

#include "log/log.h"
#include "plugins/component_failure.h"
#include "run/provenance.h"
#include "trainyard/context.h"
#include "trainyard/error.h"
#include "trainyard/version.h"
#include "util/process.h"
#include "util/text.h"

namespace trainyard::host {
namespace {

const char* kUsage =
    "usage: trainyard COMMAND [OPTIONS]\n"
    "\n"
    "commands:\n"
    "  run EXP.yaml        train (resumes from the run's latest checkpoint)\n"
    "  validate EXP.yaml   check the experiment and build its components, without training\n"
    "  plugins             list plugin libraries and their components\n"
    "  describe NAME       print a component's (or a host section's) options\n"
    "  convert             pack images and labels into an LMDB dataset\n"
    "  iterate EXP.yaml    read the training data as training would, and report samples/s\n"
    "  find-lr EXP.yaml    try learning rates; write loss against rate (CSV, SVG) and suggest one\n"
    "  sweep EXP.yaml      run every combination of --grid values; tabulate the results\n"
    "  eval EXP.yaml       the test meters on a checkpoint (default: the run's latest)\n"
    "  predict EXP.yaml    top-k classes and probabilities for an LMDB or a folder of images, as CSV\n"
    "  export EXP.yaml     the trained weights for PyTorch: a state_dict, or TorchScript\n"
    "  embed EXP.yaml      a catalog of embeddings (NumPy arrays) of a test split, an LMDB or images\n"
    "  search CATALOG      a query image's nearest catalog items, as CSV and an HTML page\n"
    "  report RUN_DIR      (re)write the run's plots/*.svg and report.html\n"
    "  completion bash     a bash completion script: source <(trainyard completion bash)\n"
    "  new-plugin NAME     write an out-of-tree plugin project (--kind network|dataset|loss|...)\n"
    "\n"
    "  trainyard COMMAND --help   options of one command\n"
    "  trainyard --version\n";

const std::map<std::string, int (*)(int, char**)> kCommands = {
    {"run", run_command},           {"validate", validate_command},     {"plugins", plugins_command},
    {"describe", describe_command}, {"convert", convert_command},       {"iterate", iterate_command},
    {"find-lr", find_lr_command},   {"sweep", sweep_command},           {"eval", eval_command},
    {"predict", predict_command},   {"report", report_command},         {"new-plugin", new_plugin_command},
    {"export", export_command},     {"completion", completion_command}, {"__complete", complete_command},
    {"embed", embed_command},       {"search", search_command}};

}  // namespace

int run_subcommand(const std::string& name, int argc, char** argv) {
  auto it = kCommands.find(name);
  return it == kCommands.end() ? 0 : it->second(argc, argv);
}

std::vector<std::string> command_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : kCommands)
    if (name.rfind("__", 0) != 0) names.push_back(name);
  return names;
}

int command_main(int argc, char** argv) {
  tune_allocator();
  install_crash_reporter();
  guard_against_exit();
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  // Only a run answers stop signals (install_early_stop_signals until its
  // experiment says which); every other command ends as a signal says.
  if (command != "run") restore_default_stop_signals();
  // The console's level, before anything is said: --log-level, else TRAINYARD_LOG_LEVEL.
  trainyard::detail::set_log_handler([](const std::string& line) { log_warning(line); });
  std::string level = std::getenv("TRAINYARD_LOG_LEVEL") ? std::getenv("TRAINYARD_LOG_LEVEL") : "info";
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--log-level" && i + 1 < argc)
      level = argv[i + 1];
    else if (arg.rfind("--log-level=", 0) == 0)
      level = arg.substr(12);
  }
  if (auto parsed = parse_log_level(level)) {
    set_log_level(*parsed);
  } else {
    log_error("error: --log-level '" + level + "' (or TRAINYARD_LOG_LEVEL); expected error, warning, info or debug");
    return 2;
  }
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (command == "--version") {
    std::cout << "trainyard " << TRAINYARD_VERSION << " (SDK API " << sdk_api_version() << ", " << TRAINYARD_FINGERPRINT
              << ")\n"
              << runtime_summary();
    return 0;
  }
  try {
    if (auto it = kCommands.find(command); it != kCommands.end()) return it->second(argc, argv);
    const std::vector<std::string> commands = command_names();
    throw ConfigError("unknown command '" + command + "'", "expected one of " + join(commands),
                      did_you_mean(command, commands));
  } catch (const ConfigError& e) {
    log_error("error: " + std::string(e.what()));
    return 2;
  } catch (const ComponentFailure& e) {
    log_error("error: " + std::string(e.what()));
    return 1;
  } catch (const c10::Error& e) {
    log_error("error: " + std::string(e.what_without_backtrace()));
    return 1;
  } catch (const std::exception& e) {
    log_error("error: " + std::string(e.what()));
    return 1;
  }
}

}  // namespace trainyard::host
