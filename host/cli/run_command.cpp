// trainyard run: parse, build the RunRequest, hand it to the Runner.
#include <iostream>

#include <torch/utils.h>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "formats/run_paths.h"
#include "log/log.h"
#include "report/final_table.h"
#include "run/experiment_file.h"
#include "run/runner.h"
#include "util/files.h"
#include "util/json.h"
#include "util/process.h"
#include "util/text.h"

namespace trainyard::host {

int run_command(int argc, char** argv) {
  const std::string usage =
      "trainyard run EXP.yaml [--set KEY=VALUE]... [--output-dir DIR] [--fresh] [--allow-config-change] "
      "[--allow-plugin-change] [--accept-unverified-checkpoints] [--until-epoch N] [--profile A:B] [--plugin-dir "
      "DIR]... "
      "[--nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P]]";
  po::options_description own("run options");
  own.add_options()("output-dir", po::value<std::string>(), "folder for run directories (default: output.dir)")(
      "fresh", "start over instead of resuming; the old run directory is kept, renamed")(
      "allow-config-change", "resume even though settings other than the loop's length changed")(
      "allow-plugin-change", "resume even though a plugin library the run uses changed content since it started")(
      "accept-unverified-checkpoints",
      "resume from checkpoints whose manifests are missing or damaged, once one of them loads")(
      "dry-run", "build everything, run one train and one test batch, print the network and timings; write nothing")(
      "debug",
      "stop at the first non-finite loss, gradient or parameter and name the operation, layer or "
      "parameter that produced it")(
      "until-epoch", ranged("until-epoch", 1, 1000000),
      "stop once N epochs are done (a checkpoint, exit 0); the schedule stays that of loop.epochs, and the next run "
      "continues it: budgets, successive-halving sweeps")(
      "profile", po::value<std::string>(),
      "A:B: a Kineto trace of train iterations A+1 to B of this run (skip A to warm up) in RUN_DIR/profile/, "
      "for Perfetto, chrome://tracing and TensorBoard, with the top operators and the step's split");
  const po::options_description visible = experiment_command_options(own, /*with_launcher=*/true);
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "experiment", vm)) return 0;

  Registry registry;
  Experiment e = load_experiment(vm, registry);  // bad input fails here, once, before any worker starts
  const Runner runner(e, registry);
  if (vm.count("dry-run")) {
    std::cout << runner.dry_run();  // one process, no run directory
    return 0;
  }
  if (vm.count("output-dir"))
    check_output_folder(vm["output-dir"].as<std::string>(),
                        "command line: --output-dir " + vm["output-dir"].as<std::string>());
  else
    check_output_folder(e.output.dir, e.where("output.dir"));
  if (auto profile = maybe<std::string>(vm, "profile")) check_profile_window(*profile);
  if (auto launched = launch_if_asked(launch_request(vm, argc, argv), e.distributed)) return *launched;
  // Start-up (building components, loading data) has no boundary to stop at:
  // until the loop begins, a stop signal ends the process at once.
  install_startup_stop_signals(e.loop.stop_signals);

  RunRequest request;
  request.output_dir = maybe<std::string>(vm, "output-dir").value_or("");
  request.fresh = vm.count("fresh") != 0;
  request.allow_config_change = vm.count("allow-config-change") != 0;
  request.allow_plugin_change = vm.count("allow-plugin-change") != 0;
  request.accept_unverified = vm.count("accept-unverified-checkpoints") != 0;
  request.debug = vm.count("debug") != 0;
  request.profile = maybe<std::string>(vm, "profile").value_or("");
  request.until_epoch = vm.count("until-epoch") ? vm["until-epoch"].as<int>() : 0;
  request.command_line.assign(argv, argv + argc);
  const RunOutcome outcome = runner.train(request);

  const RunPaths paths(outcome.run_dir);
  InfoLine() << "trainyard: done: " << outcome.epochs_done << "/" << count_of(outcome.total_epochs, "epoch")
             << "; summary in " << paths.summary << "\n"
             << final_table(outcome.values, read_events(paths.metrics));
  if (!outcome.report.empty()) InfoLine() << "trainyard: report in " << outcome.report << "\n";
  if (!outcome.stopped_by_signal) {
    const std::string& file = vm["experiment"].as<std::string>();
    InfoLine() << "next: trainyard report " << outcome.run_dir << "\n"
               << "      trainyard eval " << file << "\n"
               << "      trainyard export " << outcome.run_dir << " --format safetensors --output model.safetensors\n";
  }
  if (outcome.stopped_by_signal) {
    InfoLine() << "trainyard: stopped by a signal with a checkpoint at iteration " << outcome.iteration
               << "; run the same command to resume (exit code " << kExitStoppedResumable << ")\n";
    return kExitStoppedResumable;
  }
  return 0;
}

}  // namespace trainyard::host
