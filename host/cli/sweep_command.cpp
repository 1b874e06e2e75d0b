// trainyard sweep: a grid of runs, each its own `trainyard run`.
#include <iostream>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "sweep/sweep_run.h"
#include "util/files.h"

namespace trainyard::host {

int sweep_command(int argc, char** argv) {
  const std::string usage =
      "trainyard sweep EXP.yaml --grid KEY=V1,V2,... [--grid KEY=...]... [--parallel N] [--output-dir DIR] "
      "[--set KEY=VALUE]... [--plugin-dir DIR]...";
  po::options_description own("sweep options");
  own.add_options()("grid", po::value<std::vector<std::string>>()->composing(),
                    "a key and its values, e.g. optimizer.lr=0.1,0.01 (repeatable: the cartesian product runs)")(
      "parallel", ranged("parallel", 1, 64)->default_value(1), "runs at a time (their threads share the cores)")(
      "output-dir", po::value<std::string>(), "where the sweep folder goes (default: output.dir)");
  const po::options_description visible = experiment_command_options(own);
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "experiment", vm)) return 0;
  SweepRequest request;
  request.experiment = vm["experiment"].as<std::string>();
  request.sets = many<std::string>(vm, "set");
  request.plugin_dirs = many<std::string>(vm, "plugin-dir");
  request.grid = many<std::string>(vm, "grid");
  request.parallel = vm["parallel"].as<int>();
  request.output_dir = maybe<std::string>(vm, "output-dir").value_or("");
  if (!request.output_dir.empty())
    check_output_folder(request.output_dir, "command line: --output-dir " + request.output_dir);
  const SweepOutcome outcome = run_sweep(request);
  std::cout << "sweep: done: " << outcome.runs - outcome.failures << " of " << outcome.runs << " runs complete; "
            << outcome.sweep_dir << "/sweep.csv, sweep.md\n";
  return outcome.failures == 0 ? 0 : 1;
}

}  // namespace trainyard::host
