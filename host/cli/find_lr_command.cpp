// trainyard find-lr: learning rates tried on the experiment's start state.
#include <filesystem>
#include <iostream>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "run/experiment_file.h"
#include "run/runner.h"
#include "trainyard/error.h"
#include "util/files.h"
#include "util/json.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

LrFinderOptions finder_options(const po::variables_map& vm) {
  LrFinderOptions o;
  o.mode = vm["mode"].as<std::string>();
  o.min_lr = vm["min-lr"].as<double>();
  o.max_lr = vm["max-lr"].as<double>();
  o.num_runs = vm["num-runs"].as<int64_t>();
  o.iters_per_run = vm["iters-per-run"].as<int64_t>();
  o.iters = vm["iters"].as<int64_t>();
  if (o.mode != "restart" && o.mode != "sweep")
    throw ConfigError("command line: --mode " + o.mode, "expected restart or sweep",
                      did_you_mean(o.mode, {"restart", "sweep"}));
  if (!(o.min_lr > 0) || !(o.max_lr > o.min_lr))
    throw ConfigError("command line: --min-lr " + json_number(o.min_lr) + " --max-lr " + json_number(o.max_lr),
                      "expected 0 < min-lr < max-lr", "e.g. --min-lr 1e-6 --max-lr 1");
  if (o.num_runs < 3 || o.iters_per_run < 1 || o.iters < 5)
    throw ConfigError("command line: --num-runs " + std::to_string(o.num_runs) + " --iters-per-run " +
                          std::to_string(o.iters_per_run) + " --iters " + std::to_string(o.iters),
                      "expected --num-runs >= 3, --iters-per-run >= 1, --iters >= 5", "");
  return o;
}

}  // namespace

int find_lr_command(int argc, char** argv) {
  const std::string usage =
      "trainyard find-lr EXP.yaml [--mode restart|sweep] [--min-lr A] [--max-lr B] [--num-runs N] "
      "[--iters-per-run K] [--iters K] [--output DIR] [--set KEY=VALUE]... [--nproc-per-node N]";
  const LrFinderOptions defaults;
  po::options_description own("find-lr options");
  own.add_options()("mode", po::value<std::string>()->default_value(defaults.mode),
                    "restart: num-runs rates, each from the same initial state; sweep: one run, rate rising "
                    "exponentially")(
      "min-lr", ranged("min-lr", 1e-12, 1e6)->default_value(defaults.min_lr, readable_number(defaults.min_lr)),
      "smallest learning rate")(
      "max-lr", ranged("max-lr", 1e-12, 1e6)->default_value(defaults.max_lr, readable_number(defaults.max_lr)),
      "largest learning rate")("num-runs", ranged<int64_t>("num-runs", 3, 1000)->default_value(defaults.num_runs),
                               "restart: rates tried, log-spaced")(
      "iters-per-run", ranged<int64_t>("iters-per-run", 1, 1000000)->default_value(defaults.iters_per_run),
      "restart: optimizer updates per rate")(
      "iters", ranged<int64_t>("iters", 5, 10000000)->default_value(defaults.iters), "sweep: optimizer updates in all")(
      "output", po::value<std::string>(),
      "folder for lr_finder.csv, .svg and .json (default: OUTPUT_DIR/NAME-lr-finder)");
  const po::options_description visible = experiment_command_options(own, /*with_launcher=*/true);
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "experiment", vm)) return 0;
  const LrFinderOptions o = finder_options(vm);
  Registry registry;
  Experiment e = load_experiment(vm, registry);
  const std::string out =
      maybe<std::string>(vm, "output").value_or((fs::path(e.output.dir) / (e.name + "-lr-finder")).string());
  check_output_folder(out, vm.count("output") ? "command line: --output " + out : e.where("output.dir"));
  if (auto launched = launch_if_asked(launch_request(vm, argc, argv), e.distributed)) return *launched;
  const std::optional<LrFinderResult> found = Runner(e, registry).find_lr(o, out);
  if (!found) return 0;  // not rank 0
  const LrFinderResult& result = *found;
  if (result.suggestion)
    std::cout << "find-lr: suggested learning rate " << json_number(*result.suggestion) << " (" << result.rule << ")\n";
  else
    std::cout << "find-lr: no suggestion\n";
  if (!result.problem.empty()) std::cout << "find-lr: " << result.problem << "\n";
  std::cout << "find-lr: wrote " << out << "/lr_finder.csv, lr_finder.svg, lr_finder.json\n";
  return 0;
}

}  // namespace trainyard::host
