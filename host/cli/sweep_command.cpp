// trainyard sweep: a grid of runs, each its own `trainyard run`.
#include <iostream>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "sweep/sweep_run.h"
#include "util/files.h"

namespace trainyard::host {

int sweep_command(int argc, char** argv) {
  const std::string usage =
      "trainyard sweep EXP.yaml (--grid KEY=V1,V2,... [--grid ...]... | --space KEY=DIST(...) [--space ...]... "
      "--trials N [--seed S]) [--halving [--metric NAME] [--reduction R] [--min-epochs E]] [--parallel N] "
      "[--output-dir DIR] [--set KEY=VALUE]... [--plugin-dir DIR]...";
  po::options_description own("sweep options");
  own.add_options()("grid", po::value<std::vector<std::string>>()->composing(),
                    "a key and its values, e.g. optimizer.lr=0.1,0.01 (repeatable: the cartesian product runs)")(
      "space", po::value<std::vector<std::string>>()->composing(),
      "a key and the distribution its values are drawn from: loguniform(LOW,HIGH), uniform(LOW,HIGH), "
      "int(LOW,HIGH) or choice(V1,V2,...), e.g. 'optimizer.lr=loguniform(1e-4,1e-1)' (repeatable)")(
      "trials", ranged<int64_t>("trials", 1, 100000), "--space: how many points to draw")(
      "seed", ranged<int64_t>("seed", 0, 1LL << 53)->default_value(0),
      "--space: the draws' seed (the same seed draws the same trials)")(
      "halving",
      "asynchronous successive halving (ASHA): every trial trains --min-epochs, the best 1/--reduction of "
      "each rung go on to the next (epochs x reduction, up to loop.epochs), the rest stop there")(
      "metric", po::value<std::string>(),
      "the value that ranks runs, e.g. test_accuracy_top1 (default: stopping.monitor)")(
      "reduction", ranged<int64_t>("reduction", 2, 100)->default_value(3),
      "--halving: the top 1/R of a rung is promoted")(
      "min-epochs", ranged<int64_t>("min-epochs", 1, 1000000)->default_value(1), "--halving: the first rung's epochs")(
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
  request.space = many<std::string>(vm, "space");
  request.trials = vm.count("trials") ? vm["trials"].as<int64_t>() : 0;
  request.seed = static_cast<uint64_t>(vm["seed"].as<int64_t>());
  request.halving = vm.count("halving") != 0;
  request.metric = maybe<std::string>(vm, "metric").value_or("");
  request.reduction = vm["reduction"].as<int64_t>();
  request.min_epochs = vm["min-epochs"].as<int64_t>();
  request.parallel = vm["parallel"].as<int>();
  request.output_dir = maybe<std::string>(vm, "output-dir").value_or("");
  if (!request.output_dir.empty())
    check_output_folder(request.output_dir, "command line: --output-dir " + request.output_dir);
  const SweepOutcome outcome = run_sweep(request);
  std::cout << "sweep: done: " << outcome.runs - outcome.failures << " of " << outcome.runs << " runs without failure, "
            << outcome.epochs_trained << " epochs trained" << (outcome.best.empty() ? "" : "; best: " + outcome.best)
            << "; " << outcome.sweep_dir << "/sweep.csv, sweep.md\n";
  return outcome.failures == 0 ? 0 : 1;
}

}  // namespace trainyard::host
