#include "cli/commands.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <numeric>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <thread>

#include <ATen/Parallel.h>
#include <boost/program_options.hpp>
#include <torch/optim/optimizer.h>
#include <torch/utils.h>

#include "config/config_file.h"
#include "config/experiment.h"
#include "data/convert.h"
#include "data/loader.h"
#include "distributed/communicator.h"
#include "distributed/device.h"
#include "distributed/launcher.h"
#include "distributed/world.h"
#include "plugins/loader.h"
#include "train/components.h"
#include "report/report.h"
#include "report/svg_chart.h"
#include "run/config_diff.h"
#include "run/provenance.h"
#include "scaffold/scaffold.h"
#include "sweep/sweep.h"
#include "train/dry_run.h"
#include "train/guard.h"
#include "train/lr_finder.h"
#include "train/trainer.h"
#include "trainyard/labeled_files.h"
#include "trainyard/version.h"
#include "util/files.h"
#include "util/json.h"
#include "util/process.h"
#include "util/text.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

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
    "  report RUN_DIR      (re)write the run's plots/*.svg and report.html\n"
    "  new-plugin NAME     write an out-of-tree plugin project (--kind network|dataset|loss|...)\n"
    "\n"
    "  trainyard COMMAND --help   options of one command\n"
    "  trainyard --version\n";

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
  d.add_options()("help,h", "print this help")("version", "print the version");
  return d;
}

// Parses argv[2..] with one positional argument named `positional` (none
// when empty); returns false when --help/--version was answered.
bool parse_with(int argc, char** argv, const std::string& usage, po::options_description visible,
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
    po::notify(vm);
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

bool parse(int argc, char** argv, const std::string& usage, po::options_description visible, bool wants_experiment,
           po::variables_map& vm) {
  return parse_with(argc, argv, usage, std::move(visible), wants_experiment ? "experiment" : "", vm);
}

template <class T>
std::vector<T> many(const po::variables_map& vm, const char* key) {
  return vm.count(key) ? vm[key].as<std::vector<T>>() : std::vector<T>{};
}

// Loads the plugins an experiment can see and validates it.
Experiment load(const std::string& file, const std::vector<std::string>& sets,
                const std::vector<std::string>& plugin_dirs, Registry& registry) {
  ExperimentSource source = read_experiment(file, sets);
  load_plugin_folders(plugin_search_path(experiment_plugin_dirs(source), plugin_dirs), registry);
  return validate_experiment(std::move(source), registry);
}

// The same, from a command's EXP.yaml, --set and --plugin-dir.
Experiment load(const po::variables_map& vm, Registry& registry) {
  return load(vm["experiment"].as<std::string>(), many<std::string>(vm, "set"), many<std::string>(vm, "plugin-dir"),
              registry);
}

Context make_context(const Experiment& e, const World& world = World()) {
  Context context;
  context.rank = world.rank;
  context.world_size = world.world_size;
  context.seed = e.seed;
  context.experiment = e.name;
  context.extra = Extra(e.extra);
  context.device = rank_device(e, world);
  make_current(context.device);  // every later CUDA call without a device goes to this GPU
  int threads = static_cast<int>(e.distributed.threads_per_process);
  if (threads == 0)  // the node's cores, shared by the processes on it
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / std::max(1, world.local_world_size));
  at::set_num_threads(threads);
  return context;
}

std::string timestamp() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

// Hashes for comparing ranks (FNV-1a, 64 bits).
std::string fingerprint_of(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

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

po::options_description launch_options() {
  po::options_description d("multi-process options (one process per device; Gloo on CPUs, NCCL on GPUs)");
  d.add_options()("nproc-per-node", po::value<int>(), "start N worker processes on this machine")(
      "nnodes", po::value<int>()->default_value(1), "machines taking part")(
      "node-rank", po::value<int>()->default_value(0), "this machine's index, 0..nnodes-1")(
      "master-addr", po::value<std::string>()->default_value("127.0.0.1"), "address of node 0")(
      "master-port", po::value<int>()->default_value(0), "port on node 0 (0: a free port, one node only)");
  return d;
}

// How many processes: --nproc-per-node, else the experiment's devices
// (num_gpus, or num_cpus on the CPU), unless a launcher already started us.
// Returns the launcher's exit code when this process launched the workers.
std::optional<int> launch_if_asked(const po::variables_map& vm, const Experiment& e, int argc, char** argv) {
  const bool is_worker = std::getenv("WORLD_SIZE") || std::getenv("SLURM_NTASKS");
  const int devices = static_cast<int>(e.distributed.num_gpus > 0 ? e.distributed.num_gpus : e.distributed.num_cpus);
  if (is_worker || (!vm.count("nproc-per-node") && devices <= 1)) return std::nullopt;
  LaunchOptions launch;
  launch.nproc_per_node = vm.count("nproc-per-node") ? vm["nproc-per-node"].as<int>() : devices;
  launch.nnodes = vm["nnodes"].as<int>();
  launch.node_rank = vm["node-rank"].as<int>();
  launch.master_addr = vm["master-addr"].as<std::string>();
  launch.master_port = vm["master-port"].as<int>();
  if (launch.nproc_per_node < 1 || launch.nnodes < 1 || launch.node_rank < 0 || launch.node_rank >= launch.nnodes)
    throw ConfigError("command line: --nproc-per-node " + std::to_string(launch.nproc_per_node) + ", --nnodes " +
                          std::to_string(launch.nnodes) + ", --node-rank " + std::to_string(launch.node_rank),
                      "expected N >= 1, M >= 1 and 0 <= R < M", "");
  if (launch.nnodes > 1 && launch.master_port == 0)
    throw ConfigError("command line: --nnodes " + std::to_string(launch.nnodes) + " without --master-port",
                      "expected the same --master-addr and --master-port on every node", "");
  return launch_workers(launch, worker_arguments(argc, argv));
}

// This process's place in the world: the process group joined (with the
// experiment and plugin set checked equal on every rank), the context made.
struct Session {
  World world;
  std::unique_ptr<Communicator> comm;
  Context context;

  // make_context picks the rank's device and makes it current, before
  // anything touches CUDA (NCCL's group included).
  Session(const Experiment& e, const Registry& registry, const std::string& run_dir)
      : world(detect_world(e)), context(make_context(e, world)) {
    if (world.distributed()) {
      comm = std::make_unique<Communicator>(world, std::chrono::seconds(e.distributed.timeout_secs), context.device);
      // Every rank must run the same experiment with the same plugins.
      nlohmann::ordered_json resolved = e.resolved();
      std::vector<std::string> libraries;  // names, versions, fingerprints: paths may differ across machines
      for (const auto& lib : registry.libraries()) libraries.push_back(lib->name + " " + lib->version + " " + lib->fingerprint);
      std::sort(libraries.begin(), libraries.end());
      const std::string plugins = join(libraries, "\n");
      resolved.erase("resolved_plugins");
      resolved.erase("plugin_dirs");
      comm->check_same("experiment (resolved config)", fingerprint_of(to_yaml(resolved)));
      comm->check_same("plugin set", fingerprint_of(plugins));
    }
    context.run_dir = run_dir;
    context.collectives = comm ? &comm->collectives() : nullptr;
    context.sync_batch_norm = e.distributed.sync_batch_norm;
  }
};

// Which parameters fell in which optimizer group, and what is frozen.
void print_groups(const Components& built, const Experiment& ex, const std::string& indent) {
  std::cout << indent << "parameter groups:\n";
  for (const auto& g : built.groups)
    std::cout << indent << "  " << g.name << ": " << g.parameters.size() << " tensors, " << g.numel << " values, lr "
              << json_number(g.lr) << ", weight decay " << g.weight_decay << "\n" << indent << "    "
              << join(g.parameters) << "\n";
  if (!built.frozen.empty()) std::cout << indent << "frozen: " << join(ex.network.freeze) << "\n";
}

int run(int argc, char** argv) {
  const std::string usage =
      "trainyard run EXP.yaml [--set KEY=VALUE]... [--output-dir DIR] [--fresh] [--plugin-dir DIR]... "
      "[--nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P]]";
  po::options_description visible;
  po::options_description run_options("run options");
  run_options.add_options()("output-dir", po::value<std::string>(), "folder for run directories (default: output.dir)")(
      "fresh", "start over instead of resuming; the old run directory is kept, renamed")(
      "allow-config-change", "resume even though settings other than the loop's length changed")(
      "dry-run", "build everything, run one train and one test batch, print the network and timings; write nothing")(
      "debug", "stop at the first non-finite loss, gradient or parameter and name the operation, layer or "
               "parameter that produced it");
  visible.add(run_options).add(launch_options()).add(experiment_options()).add(plugin_options()).add(help_option());
  po::variables_map vm;
  if (!parse(argc, argv, usage, visible, true, vm)) return 0;

  // Bad input fails here, once, before any worker starts.
  Registry registry;
  Experiment e = load(vm, registry);

  if (vm.count("dry-run")) {
    // One process, no run directory: what the first stage would train.
    const Experiment& first = e.stages.empty() ? e : e.stages[0];
    Context context = make_context(first);
    torch::manual_seed(first.seed);
    Components built = build_components(first, context);
    std::cout << dry_run_report(first, built, context);
    print_groups(built, first, "");
    return 0;
  }
  if (auto launched = launch_if_asked(vm, e, argc, argv)) return *launched;

  const std::string out_dir = vm.count("output-dir") ? vm["output-dir"].as<std::string>() : e.output.dir;
  const std::string run_dir = (fs::path(out_dir) / e.name).string();

  Session session(e, registry, run_dir);
  const World& world = session.world;
  Context& context = session.context;
  std::unique_ptr<Communicator>& comm = session.comm;
  // A multi-stage run trains its stages in turn, one Trainer each; a one-stage
  // run is its only stage.
  const size_t stage_count = std::max<size_t>(1, e.stages.size());
  auto stage_experiment = [&](size_t k) -> const Experiment& { return e.stages.empty() ? e : e.stages[k]; };
  auto make_trainer = [&](size_t k) {
    const Experiment& ek = stage_experiment(k);
    torch::manual_seed(ek.seed);  // the same initial weights (and generator state) whichever way a stage starts
    Components components = build_components(ek, context);
    auto t = std::make_unique<Trainer>(ek, std::move(components), context, RunPaths(run_dir));
    t->set_communicator(comm.get());
    t->set_debug(vm.count("debug") != 0);
    StageInfo info;
    info.index = static_cast<int64_t>(k);
    info.count = static_cast<int64_t>(stage_count);
    info.name = ek.stage_name;
    for (size_t j = 0; j < k; ++j) info.first_epoch += stage_experiment(j).loop.epochs;
    t->set_stage(info);
    return t;
  };

  // Resume before writing anything: a checkpoint that does not fit is bad input.
  const bool fresh = vm.count("fresh") != 0;
  if (context.rank == 0 && !fresh) {
    auto stale = remove_stale_temporaries(RunPaths(run_dir).checkpoints);
    if (!stale.empty())
      std::cout << "trainyard: removed " << stale.size() << " leftover file(s) of an interrupted checkpoint write: "
                << join(stale) << "\n";
  }
  // A write past a file size limit fails with EFBIG (and is reported) instead of killing the process.
  ::signal(SIGXFSZ, SIG_IGN);
  std::string resumed_from;
  std::unique_ptr<Trainer> trainer;
  size_t stage = 0;
  if (!fresh) {
    auto checkpoints = list_checkpoints(RunPaths(run_dir).checkpoints);
    std::vector<std::string> failures;
    for (auto it = checkpoints.rbegin(); it != checkpoints.rend() && resumed_from.empty(); ++it) {
      // An incomplete or damaged checkpoint is as if it were not there: the
      // next older one is used, or the run starts over when there is none.
      try {
        verify_checkpoint(*it);
      } catch (const Error& err) {
        context.log("warning: " + std::string(err.what()) + "; trying an older checkpoint");
        continue;
      }
      try {
        const CheckpointState peeked = peek_checkpoint(*it);  // which stage to build
        if (peeked.stage < 0 || peeked.stage >= static_cast<int64_t>(stage_count))
          throw Error(*it + ": checkpoint of stage " + std::to_string(peeked.stage + 1) + ", but the experiment has " +
                      std::to_string(stage_count));
        stage = static_cast<size_t>(peeked.stage);
        trainer = make_trainer(stage);
        trainer->resume(*it, Verify::already_done);  // verified above: hash it once
        resumed_from = *it;
      } catch (const Error& err) {
        trainer.reset();
        failures.push_back(err.what());
        context.log("warning: " + std::string(err.what()) + "; trying an older checkpoint");
      }
    }
    if (resumed_from.empty() && !failures.empty())
      throw ConfigError(run_dir + ": no checkpoint of this run could be loaded (" + failures.front() + ")",
                        "expected a checkpoint of the same network and optimizer",
                        "run with --fresh to start over (the old run directory is kept)");
  }
  if (!trainer) stage = 0, trainer = make_trainer(0);
  // Later stages' freezing is checked now, not after the earlier stages trained.
  for (size_t k = stage + 1; k < stage_count; ++k) {
    try {
      check_network_settings(stage_experiment(k).network, trainer->network());
    } catch (const ConfigError& err) {
      throw ConfigError("stage " + std::to_string(k + 1) + " '" + stage_experiment(k).stage_name + "': " + err.what());
    }
  }
  const auto [params, trainable] = parameter_count(trainer->network());
  if (comm) {
    // Same weights everywhere: the same checkpoint, then rank 0's tensors.
    comm->check_same("checkpoint to resume from", fs::path(resumed_from).filename().string());
    comm->broadcast_module(*trainer->network_module());
  }
  // A resumed run continues the same experiment: more epochs, yes; another
  // learning rate or network, only when asked (the differences are printed).
  const std::string saved_config = (fs::path(run_dir) / "config.yaml").string();
  if (!resumed_from.empty() && fs::exists(saved_config)) {
    auto changes = config_changes(read_config_file(saved_config), e.resolved());
    const bool refused = std::any_of(changes.begin(), changes.end(), [](const auto& c) { return !c.allowed; });
    if (!changes.empty() && context.rank == 0)
      std::cout << "trainyard: the experiment changed since this run's config.yaml:\n" << describe_changes(changes);
    if (refused && !vm.count("allow-config-change"))
      throw ConfigError(saved_config + ": resuming with changed settings (listed above)",
                        "expected the same experiment; only the loop's length (loop.epochs), logging and input "
                        "threads may change on resume",
                        "run with --allow-config-change to resume anyway, or --fresh to start over");
  }
  if (context.rank == 0) {
    if (fresh && fs::exists(run_dir)) {
      std::string kept = run_dir + ".replaced-" + timestamp();
      for (int n = 2; fs::exists(kept); ++n) kept = run_dir + ".replaced-" + timestamp() + "-" + std::to_string(n);
      fs::rename(run_dir, kept);
      std::cout << "trainyard: --fresh: previous run kept in " << kept << "\n";
    }
    fs::create_directories(run_dir);
    const nlohmann::ordered_json resolved = e.resolved();
    write_file_atomic((fs::path(run_dir) / "config.yaml").string(), to_yaml(resolved));
    // (Bytes that are not UTF-8, possible in YAML strings, become U+FFFD in JSON.)
    write_file_atomic((fs::path(run_dir) / "config.json").string(),
                      resolved.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
    record_provenance(run_dir, provenance_json(std::vector<std::string>(argv, argv + argc), registry, world.world_size));
  }
  if (comm) comm->barrier();
  if (world.distributed())
    std::cout << "trainyard: rank " << world.rank << " of " << world.world_size << " (launched by " << world.launched_by
              << ")\n";

  int64_t total_epochs = 0;
  for (size_t k = 0; k < stage_count; ++k) total_epochs += stage_experiment(k).loop.epochs;
  std::cout << "trainyard: " << e.name << ": network " << e.network.plugin << " (" << params << " parameters, "
            << trainable << " trainable), " << at::get_num_threads() << " threads, run directory " << run_dir << "\n";
  if (!resumed_from.empty()) {
    auto at = trainer->position_state();
    std::cout << "trainyard: resuming from " << resumed_from << " (epoch " << at.epoch << " done, iteration "
              << at.iteration
              << (stage_count > 1 ? ", stage " + std::to_string(stage + 1) + " '" + trainer->stage().name + "'" : "")
              << ")\n";
    if (at.epoch >= total_epochs && at.position == 0)
      std::cout << "trainyard: all " << total_epochs << " epochs are already done; raise loop.epochs to train more\n";
  }
  auto announce = [&] {
    if (stage_count > 1)
      std::cout << "trainyard: stage " << stage + 1 << "/" << stage_count << " '" << trainer->stage().name << "': epochs "
                << trainer->stage().first_epoch + 1 << "-" << trainer->epochs() << ", optimizer "
                << stage_experiment(stage).optimizer.plugin << ", " << parameter_count(trainer->network()).second
                << " trainable parameters\n";
    std::cout.flush();
  };
  install_stop_signals(e.loop.stop_signals);
  announce();
  trainer->run();
  // Later stages start from the weights the previous one ended with, with their own optimizer.
  while (stage + 1 < stage_count && !trainer->ended_by_request()) {
    auto next = make_trainer(++stage);
    next->continue_from(*trainer);
    trainer = std::move(next);
    announce();
    trainer->run();
  }
  std::string final_values;
  for (const auto& [k, v] : trainer->values()) final_values += " " + k + "=" + json_number(v);
  std::cout << "trainyard: done: " << trainer->epoch() << "/" << total_epochs << " epochs"
            << (final_values.empty() ? "" : ":") << final_values
            << "; summary in " << RunPaths(run_dir).summary << "\n";
  if (context.rank == 0 && e.output.report && fs::exists(RunPaths(run_dir).metrics))
    std::cout << "trainyard: report in " << write_report(run_dir, e.output.plots) << "\n";
  if (trainer->stopped_by_signal()) {
    std::cout << "trainyard: stopped by a signal with a checkpoint at iteration " << trainer->iteration()
              << "; run the same command to resume (exit code " << kExitStoppedResumable << ")\n";
    return kExitStoppedResumable;
  }
  return 0;
}

int validate(int argc, char** argv) {
  const std::string usage = "trainyard validate EXP.yaml [--set KEY=VALUE]... [--plugin-dir DIR]...";
  po::options_description visible;
  visible.add(experiment_options()).add(plugin_options()).add(help_option());
  po::variables_map vm;
  if (!parse(argc, argv, usage, visible, true, vm)) return 0;
  Registry registry;
  Experiment e = load(vm, registry);
  Context context = make_context(e);
  torch::manual_seed(e.seed);
  Components c = build_components(e, context);
  const auto [params, trainable] = parameter_count(*c.network.object);
  std::cout << "ok: " << e.path << " (" << e.name << "): dataset " << e.train_data.plugin << " ("
            << c.train_data.object->size() << " train"
            << (c.test_data.object ? ", " + std::to_string(c.test_data.object->size()) + " test" : std::string())
            << " samples), network " << e.network.plugin << " (" << params << " parameters, " << trainable
            << " trainable), loss " << e.loss.plugin << ", optimizer " << e.optimizer.plugin << ", "
            << e.meters.size() << " meters, " << e.callbacks.size() << " callbacks, " << e.overrides.size()
            << " overrides\n";
  if (e.stages.empty()) print_groups(c, e, "");
  // Each stage built as it will be: its optimizer, groups and freezing.
  for (size_t k = 0; k < e.stages.size(); ++k) {
    const Experiment& s = e.stages[k];
    torch::manual_seed(s.seed);
    Components built;
    try {
      built = build_components(s, context);
    } catch (const ConfigError& err) {
      throw ConfigError("stage " + std::to_string(k + 1) + " '" + s.stage_name + "': " + err.what());
    }
    std::cout << "stage " << k + 1 << " '" << s.stage_name << "': " << s.loop.epochs << " epochs, batch "
              << s.loop.batch_per_device << ", optimizer " << s.optimizer.plugin << ", schedule " << s.schedule.policy
              << ", " << parameter_count(*built.network.object).second << " trainable parameters\n";
    print_groups(built, s, "  ");
  }
  return 0;
}

int plugins(int argc, char** argv) {
  const std::string usage = "trainyard plugins [--plugin-dir DIR]...";
  po::options_description visible;
  visible.add(plugin_options()).add(help_option());
  po::variables_map vm;
  if (!parse(argc, argv, usage, visible, false, vm)) return 0;
  Registry registry;
  std::vector<std::string> refused;
  auto folders = plugin_search_path({}, many<std::string>(vm, "plugin-dir"));
  load_plugin_folders(folders, registry, &refused);
  std::cout << "host: trainyard " << TRAINYARD_VERSION << ", SDK API " << sdk_api_version() << ", fingerprint "
            << TRAINYARD_FINGERPRINT << "\n";
  for (const auto& f : folders) std::cout << "folder: " << f.path << " (" << f.origin << ")\n";
  for (const auto& lib : registry.libraries()) {
    std::cout << "\n" << lib->path << "\n  " << lib->name << " " << lib->version << " (API " << lib->api_major << "."
              << lib->api_minor << "), fingerprint ok";
    if (!lib->description.empty()) std::cout << "\n  " << lib->description;
    std::cout << "\n";
    for (Kind kind : kAllKinds) {
      std::vector<std::string> names;
      for (const auto* c : registry.components_of(*lib))
        if (c->kind == kind) names.push_back(c->name);
      if (!names.empty()) std::cout << "  " << kind_plural(kind) << ": " << join(names) << "\n";
    }
  }
  for (const auto& r : refused) std::cout << "\nREFUSED: " << r << "\n";
  if (!refused.empty()) {
    std::cerr << "error: " << refused.size() << " plugin librar" << (refused.size() == 1 ? "y was" : "ies were")
              << " refused (listed above)\n";
    return 2;
  }
  return 0;
}

void print_schema(const Schema& schema) {
  if (schema.specs().empty()) {
    std::cout << "  (no options)\n";
    return;
  }
  for (const auto& s : schema.specs()) {
    std::string constraints;
    const bool integral = s.type == OptionType::integer || s.type == OptionType::integer_list;
    auto bound = [&](double v) { return integral ? std::to_string(static_cast<int64_t>(v)) : to_string(Value(v)); };
    if (s.min_value) constraints += (s.min_exclusive ? " above " : " min ") + bound(*s.min_value);
    if (s.max_value) constraints += (s.max_exclusive ? " below " : " max ") + bound(*s.max_value);
    if (!s.choices.empty()) constraints += " one of: " + join(s.choices);
    std::cout << "  " << s.key << "\n      type: " << type_name(s.type)
              << "\n      default: " << (s.required() ? "(required)" : to_string(*s.default_value))
              << (constraints.empty() ? "" : "\n      constraints:" + constraints) << "\n      " << s.description
              << "\n";
  }
}

int describe(int argc, char** argv) {
  const std::string usage = "trainyard describe NAME [--plugin-dir DIR]...";
  po::options_description visible;
  visible.add(plugin_options()).add(help_option());
  po::variables_map vm;
  po::options_description all;
  all.add(visible);
  all.add_options()("name", po::value<std::string>());
  po::positional_options_description positional;
  positional.add("name", 1);
  try {
    po::store(po::command_line_parser(argc - 1, argv + 1).options(all).positional(positional).run(), vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string("command line: ") + e.what(), "expected " + usage, "see trainyard describe --help");
  }
  if (vm.count("help")) {
    std::cout << "usage: " << usage << "\n\nNAME is a component name (mlp, sgd, ...) or a host section (loop, "
                 "distributed, output).\n\n"
              << visible << "\n";
    return 0;
  }
  if (vm.count("version")) return parse(argc, argv, usage, visible, false, vm), 0;
  if (!vm.count("name"))
    throw ConfigError("command line: missing NAME", "expected " + usage, "e.g. trainyard describe mlp");
  const std::string name = vm["name"].as<std::string>();
  const std::vector<std::pair<std::string, const Schema*>> sections = {
      {"loop", &loop_schema()}, {"distributed", &distributed_schema()}, {"output", &output_schema()},
      {"schedule", &schedule_schema()}, {"stopping", &stopping_schema()}};
  for (const auto& [section, schema] : sections)
    if (name == section) {
      std::cout << section << " (host section)\n";
      print_schema(*schema);
      return 0;
    }
  Registry registry;
  load_plugin_folders(plugin_search_path({}, many<std::string>(vm, "plugin-dir")), registry);
  auto found = registry.find_any(name);
  if (found.empty()) {
    std::vector<std::string> known = {"loop", "distributed", "output", "schedule", "stopping"};
    for (Kind kind : kAllKinds)
      for (const auto& n : registry.names(kind)) known.push_back(n);
    throw ConfigError("describe: '" + name + "' is neither a registered component nor a host section",
                      "expected one of " + join(known), did_you_mean(name, known));
  }
  for (const auto* c : found) {
    std::cout << c->name << " (" << kind_name(c->kind) << ") from " << c->library->path << " "
              << c->library->version << "\n  " << c->description << "\noptions:\n";
    print_schema(c->schema);
  }
  return 0;
}

int convert_command(int argc, char** argv) {
  const std::string usage =
      "trainyard convert --from folder|csv|idx|parallel [--input PATH]... [--target DIR]... [--images F --labels F]"
      " --output DIR [--encoding png|jpeg|raw] [--quality Q] [--resize HxW] [--shuffle] [--seed S]"
      " [--test-fraction F] [--limit N] [--overwrite]";
  po::options_description visible("convert options");
  ConvertOptions o;
  std::string resize;
  visible.add_options()("from", po::value<std::string>(&o.from)->required(),
                        "folder (ROOT/<class>/images), csv (path,label lines), idx (MNIST files), "
                        "parallel (folders of matching file names)")(
      "input", po::value<std::vector<std::string>>(&o.inputs)->composing(), "source folder or CSV (parallel: repeatable)")(
      "target", po::value<std::vector<std::string>>(&o.targets)->composing(), "parallel: target image folder (repeatable)")(
      "images", po::value<std::string>(&o.images), "idx: images file")("labels", po::value<std::string>(&o.labels),
                                                                         "idx: labels file")(
      "output", po::value<std::string>(&o.output)->required(), "LMDB folder to create")(
      "encoding", po::value<std::string>(&o.encoding)->default_value("png"), "png, jpeg or raw")(
      "quality", po::value<int>(&o.quality)->default_value(95), "JPEG quality 1..100")(
      "resize", po::value<std::string>(&resize), "resize every image to HxW on the way in")(
      "shuffle", po::bool_switch(&o.shuffle), "shuffle the samples (with --seed)")(
      "seed", po::value<uint64_t>(&o.seed)->default_value(0), "seed of --shuffle")(
      "test-fraction", po::value<double>(&o.test_fraction)->default_value(0),
      "split off this fraction as OUTPUT/test (the rest is OUTPUT/train)")(
      "limit", po::value<int64_t>(&o.limit)->default_value(0), "convert only the first N samples (after shuffling)")(
      "overwrite", po::bool_switch(&o.overwrite), "replace an existing OUTPUT (only once the new one is complete)")(
      "quiet", "no progress line");
  visible.add(help_option());
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc - 1, argv + 1).options(visible).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: " << usage << "\n\n" << visible << "\n";
      return 0;
    }
    if (vm.count("version")) return parse(argc, argv, usage, visible, false, vm), 0;
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string("command line: ") + e.what(), "expected " + usage, "see trainyard convert --help");
  }
  if (!resize.empty() && std::sscanf(resize.c_str(), "%dx%d", &o.resize_h, &o.resize_w) != 2)
    throw ConfigError("convert: --resize '" + resize + "'", "expected HEIGHTxWIDTH, e.g. 32x32", "");
  o.progress = !vm.count("quiet");
  ConvertResult r = convert(o);
  std::cout << "convert: wrote " << r.written << " records to " << join(r.databases) << " in "
            << json_number(std::round(r.seconds * 100) / 100) << " s\n";
  return 0;
}

int find_lr(int argc, char** argv) {
  const std::string usage =
      "trainyard find-lr EXP.yaml [--mode restart|sweep] [--min-lr A] [--max-lr B] [--num-runs N] "
      "[--iters-per-run K] [--iters K] [--output DIR] [--set KEY=VALUE]... [--nproc-per-node N]";
  LrFinderOptions o;
  po::options_description own("find-lr options");
  own.add_options()("mode", po::value<std::string>()->default_value(o.mode),
                    "restart: num-runs rates, each from the same initial state; sweep: one run, rate rising "
                    "exponentially")(
      "min-lr", po::value<double>()->default_value(o.min_lr), "smallest learning rate")(
      "max-lr", po::value<double>()->default_value(o.max_lr), "largest learning rate")(
      "num-runs", po::value<int64_t>()->default_value(o.num_runs), "restart: rates tried, log-spaced")(
      "iters-per-run", po::value<int64_t>()->default_value(o.iters_per_run), "restart: optimizer updates per rate")(
      "iters", po::value<int64_t>()->default_value(o.iters), "sweep: optimizer updates in all")(
      "output", po::value<std::string>(), "folder for lr_finder.csv, .svg and .json (default: OUTPUT_DIR/NAME-lr-finder)");
  po::options_description visible;
  visible.add(own).add(launch_options()).add(experiment_options()).add(plugin_options()).add(help_option());
  po::variables_map vm;
  if (!parse(argc, argv, usage, visible, true, vm)) return 0;
  o.mode = vm["mode"].as<std::string>();
  o.min_lr = vm["min-lr"].as<double>();
  o.max_lr = vm["max-lr"].as<double>();
  o.num_runs = vm["num-runs"].as<int64_t>();
  o.iters_per_run = vm["iters-per-run"].as<int64_t>();
  o.iters = vm["iters"].as<int64_t>();
  check_lr_finder_options(o);

  Registry registry;
  Experiment e = load(vm, registry);
  if (auto launched = launch_if_asked(vm, e, argc, argv)) return *launched;
  const std::string out = vm.count("output") ? vm["output"].as<std::string>()
                                             : (fs::path(e.output.dir) / (e.name + "-lr-finder")).string();
  // The run directory is never touched: the finder trains a copy of the start state and writes only `out`.
  Session session(e, registry, out);
  torch::manual_seed(e.seed);
  Components components = build_components(e, session.context);
  Trainer trainer(e, std::move(components), session.context, RunPaths(out));
  trainer.set_communicator(session.comm.get());
  if (session.comm) session.comm->broadcast_module(*trainer.network_module());
  const bool rank0 = session.context.rank == 0;
  if (rank0)
    std::cout << "find-lr: " << e.name << ": " << o.mode << " over [" << json_number(o.min_lr) << ", "
              << json_number(o.max_lr) << "], optimizer " << e.optimizer.plugin << ", batch "
              << e.loop.batch_per_device << " x " << session.context.world_size << " rank(s)\n" << std::flush;
  LrFinderResult result = find_learning_rate(trainer, session.comm.get(), o, rank0);
  if (rank0) {
    fs::create_directories(out);
    write_file_atomic((fs::path(out) / "lr_finder.csv").string(), lr_finder_csv(result));
    write_file_atomic((fs::path(out) / "lr_finder.svg").string(),
                      svg_line_chart(lr_finder_chart(result, e.name + ": loss against learning rate (" + o.mode + ")")));
    write_file_atomic((fs::path(out) / "lr_finder.json").string(),
                      "{\"mode\": " + json_string(o.mode) + ", \"suggestion\": " +
                          (result.suggestion ? json_number(*result.suggestion) : std::string("null")) +
                          ", \"rule\": " + json_string(result.rule) + ", \"problem\": " + json_string(result.problem) +
                          ", \"diverged\": " + (result.diverged ? "true" : "false") + "}\n");
    if (result.suggestion)
      std::cout << "find-lr: suggested learning rate " << json_number(*result.suggestion) << " (" << result.rule << ")\n";
    else
      std::cout << "find-lr: no suggestion\n";
    if (!result.problem.empty()) std::cout << "find-lr: " << result.problem << "\n";
    std::cout << "find-lr: wrote " << out << "/lr_finder.csv, lr_finder.svg, lr_finder.json\n";
  }
  return 0;
}

// Starts `args` with stdout and stderr into `log`; returns the child's pid.
pid_t spawn_logged(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> cargs;
  for (const auto& a : args) cargs.push_back(const_cast<char*>(a.c_str()));
  cargs.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("sweep: cannot start a process: fork failed");
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2), ::close(fd);
    ::execv(cargs[0], cargs.data());
    ::_exit(127);
  }
  return pid;
}

std::string last_error_line(const std::string& log) {
  std::string found;
  for (const auto& line : read_lines(log))
    if (line.rfind("error: ", 0) == 0) found = line.substr(7);
  return found;
}

int sweep(int argc, char** argv) {
  const std::string usage =
      "trainyard sweep EXP.yaml --grid KEY=V1,V2,... [--grid KEY=...]... [--parallel N] [--output-dir DIR] "
      "[--set KEY=VALUE]... [--plugin-dir DIR]...";
  po::options_description own("sweep options");
  own.add_options()("grid", po::value<std::vector<std::string>>()->composing(),
                    "a key and its values, e.g. optimizer.lr=0.1,0.01 (repeatable: the cartesian product runs)")(
      "parallel", po::value<int>()->default_value(1), "runs at a time (their threads share the cores)")(
      "output-dir", po::value<std::string>(), "where the sweep folder goes (default: output.dir)");
  po::options_description visible;
  visible.add(own).add(experiment_options()).add(plugin_options()).add(help_option());
  po::variables_map vm;
  if (!parse(argc, argv, usage, visible, true, vm)) return 0;
  const std::string exp = vm["experiment"].as<std::string>();
  const auto sets = many<std::string>(vm, "set");
  const auto plugin_dirs = many<std::string>(vm, "plugin-dir");
  const auto grid = many<std::string>(vm, "grid");
  const int parallel = vm["parallel"].as<int>();
  if (grid.empty()) throw ConfigError("command line: no --grid", "expected " + usage, "e.g. --grid optimizer.lr=0.1,0.01");
  if (parallel < 1) throw ConfigError("command line: --parallel " + std::to_string(parallel), "expected at least 1", "");

  Registry registry;
  Experiment base = load(exp, sets, plugin_dirs, registry);
  std::vector<GridAxis> axes;
  for (const auto& g : grid) axes.push_back(parse_grid(g));
  const auto points = expand_grid(base.name, axes);
  const std::string out_dir = vm.count("output-dir") ? vm["output-dir"].as<std::string>() : base.output.dir;
  const std::string sweep_dir = (fs::path(out_dir) / (base.name + "-sweep")).string();

  // Every point is validated before anything runs: a bad value fails the sweep now, exit 2.
  std::vector<int64_t> total_epochs;
  std::vector<std::vector<std::string>> point_sets;
  for (const auto& p : points) {
    auto s = sets;
    for (const auto& kv : p.sets()) s.push_back(kv);
    s.push_back("name=" + p.name);
    try {
      Registry r;
      Experiment e = load(exp, s, plugin_dirs, r);
      int64_t total = 0;
      if (e.stages.empty()) total = e.loop.epochs;
      for (const auto& st : e.stages) total += st.loop.epochs;
      total_epochs.push_back(total);
    } catch (const ConfigError& err) {
      throw ConfigError("sweep point " + p.name + ": " + err.what());
    }
    point_sets.push_back(std::move(s));
  }
  // Parallel runs share the cores unless the experiment says how many threads each takes.
  bool threads_set = false;
  for (const auto& s : sets) threads_set = threads_set || s.rfind("distributed.threads_per_process=", 0) == 0;
  if (parallel > 1 && !threads_set && base.distributed.threads_per_process == 0)
    for (auto& s : point_sets)
      s.push_back("distributed.threads_per_process=" +
                  std::to_string(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / parallel)));

  fs::create_directories(fs::path(sweep_dir) / "logs");
  std::cout << "sweep: " << points.size() << " runs of " << exp << " in " << sweep_dir << ", " << parallel
            << " at a time\n" << std::flush;
  std::vector<SweepResult> results(points.size());
  auto write_tables = [&] {
    std::vector<SweepResult> done;
    for (const auto& r : results)
      if (!r.status.empty()) done.push_back(r);
    write_file_atomic((fs::path(sweep_dir) / "sweep.csv").string(), sweep_csv(axes, done));
    write_file_atomic((fs::path(sweep_dir) / "sweep.md").string(),
                      "# Sweep of " + exp + "\n\n" + sweep_markdown(axes, done));
  };
  std::map<pid_t, size_t> running;
  std::map<size_t, std::chrono::steady_clock::time_point> started;
  size_t next = 0, finished = 0;
  int failures = 0;
  auto report = [&](size_t i) {
    const auto& r = results[i];
    ++finished;
    std::string best;
    for (const auto& [k, v] : r.metrics)
      if (k.rfind("test_", 0) == 0) best += " " + k + "=" + json_number(v);
    std::cout << "sweep: [" << finished << "/" << points.size() << "] " << r.point.name << ": " << r.status
              << (r.error.empty() ? "" : " (" + r.error + ")") << best << "\n" << std::flush;
    write_tables();
  };
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  while (next < points.size() || !running.empty()) {
    while (next < points.size() && static_cast<int>(running.size()) < parallel) {
      const size_t i = next++;
      results[i].point = points[i];
      const std::string run_dir = (fs::path(sweep_dir) / points[i].name).string();
      if (read_summary(run_dir, total_epochs[i], results[i].metrics, results[i].wall_s)) {
        results[i].status = "skipped (finished before)";
        report(i);
        continue;
      }
      std::vector<std::string> args{self, "run", exp, "--output-dir", sweep_dir};
      for (const auto& s : point_sets[i]) args.push_back("--set"), args.push_back(s);
      for (const auto& d : plugin_dirs) args.push_back("--plugin-dir"), args.push_back(d);
      running[spawn_logged(args, (fs::path(sweep_dir) / "logs" / (points[i].name + ".log")).string())] = i;
      started[i] = std::chrono::steady_clock::now();
    }
    if (running.empty()) continue;
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) break;
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const size_t i = it->second;
    running.erase(it);
    auto& r = results[i];
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const std::string run_dir = (fs::path(sweep_dir) / points[i].name).string();
    const bool complete = read_summary(run_dir, total_epochs[i], r.metrics, r.wall_s);
    if (r.exit_code == 0 && complete) {
      r.status = "finished";
    } else {
      r.status = r.exit_code == 0 ? "incomplete" : "failed";
      r.error = last_error_line((fs::path(sweep_dir) / "logs" / (points[i].name + ".log")).string());
      if (r.error.empty()) r.error = "exit code " + std::to_string(r.exit_code);
      ++failures;
    }
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started[i]).count();
    report(i);
  }
  std::cout << "sweep: done: " << points.size() - failures << " of " << points.size() << " runs complete; "
            << sweep_dir << "/sweep.csv, sweep.md\n";
  return failures == 0 ? 0 : 1;
}

// The checkpoint `eval` and `predict` read: --checkpoint, else the run's latest.
std::string checkpoint_to_read(const po::variables_map& vm, const Experiment& e) {
  if (vm.count("checkpoint")) {
    const std::string path = vm["checkpoint"].as<std::string>();
    if (!fs::is_regular_file(path))
      throw ConfigError("command line: --checkpoint " + path + ": no such file", "expected a checkpoint file", "");
    return path;
  }
  const std::string out_dir = vm.count("output-dir") ? vm["output-dir"].as<std::string>() : e.output.dir;
  const std::string dir = RunPaths((fs::path(out_dir) / e.name).string()).checkpoints;
  auto all = list_checkpoints(dir);
  if (all.empty())
    throw ConfigError(dir + ": no checkpoint to read", "expected a trained run of " + e.path,
                      "train it first, or pass --checkpoint PATH");
  return all.back();
}

// Components of the stage the checkpoint belongs to, with its weights loaded.
struct LoadedModel {
  Context context;
  const Experiment* stage = nullptr;
  std::unique_ptr<Trainer> trainer;
};
LoadedModel load_model(const Experiment& e, const std::string& checkpoint) {
  LoadedModel m;
  const CheckpointState peeked = peek_checkpoint(checkpoint);
  m.stage = e.stages.empty() ? &e : &e.stages.at(static_cast<size_t>(std::max<int64_t>(0, peeked.stage)));
  m.context = make_context(*m.stage);
  torch::manual_seed(m.stage->seed);
  Components c = build_components(*m.stage, m.context);
  m.trainer = std::make_unique<Trainer>(*m.stage, std::move(c), m.context, RunPaths(""));
  try {
    load_checkpoint(checkpoint, m.trainer->network(), m.trainer->optimizer());
  } catch (const Error& err) {
    throw ConfigError(err.what(), "expected a checkpoint of this experiment's network", "");
  }
  return m;
}

int eval_command(int argc, char** argv) {
  const std::string usage = "trainyard eval EXP.yaml [--checkpoint PATH] [--output FILE.json] [--output-dir DIR] "
                            "[--set KEY=VALUE]... [--plugin-dir DIR]...";
  po::options_description own("eval options");
  own.add_options()("checkpoint", po::value<std::string>(), "checkpoint to evaluate (default: the run's latest)")(
      "output-dir", po::value<std::string>(), "folder of run directories (default: output.dir)")(
      "output", po::value<std::string>(), "also write the values as JSON to this file");
  po::options_description visible;
  visible.add(own).add(experiment_options()).add(plugin_options()).add(help_option());
  po::variables_map vm;
  if (!parse(argc, argv, usage, visible, true, vm)) return 0;
  Registry registry;
  Experiment e = load(vm, registry);
  const std::string checkpoint = checkpoint_to_read(vm, e);
  LoadedModel m = load_model(e, checkpoint);
  const MeterValues values = m.trainer->test_pass();
  std::cout << "eval: " << checkpoint << ":";
  for (const auto& [k, v] : values) std::cout << " " << k << "=" << json_number(v);
  std::cout << "\n";
  if (vm.count("output"))
    write_file_atomic(vm["output"].as<std::string>(),
                      "{\"checkpoint\": " + json_string(checkpoint) + ", \"values\": " + json_object(values) + "}\n");
  return 0;
}

int predict_command(int argc, char** argv) {
  const std::string usage =
      "trainyard predict EXP.yaml --input LMDB_OR_FOLDER --output preds.csv [--checkpoint PATH] [--topk K] "
      "[--input-options YAML] [--set KEY=VALUE]... [--plugin-dir DIR]...";
  po::options_description own("predict options");
  own.add_options()("input", po::value<std::string>(), "an LMDB made by trainyard convert, or a folder of images")(
      "output", po::value<std::string>(), "CSV to write: one row per input sample")(
      "checkpoint", po::value<std::string>(), "weights to use (default: the run's latest checkpoint)")(
      "output-dir", po::value<std::string>(), "folder of run directories (default: output.dir)")(
      "topk", po::value<int64_t>()->default_value(5), "classes per row, most probable first")(
      "input-options", po::value<std::string>(),
      "YAML map of preprocessing options for the input (default: those of dataset.test when it is an lmdb, "
      "image_folder or csv dataset), e.g. '{mean: [0.286], std: [0.353]}'");
  po::options_description visible;
  visible.add(own).add(experiment_options()).add(plugin_options()).add(help_option());
  po::variables_map vm;
  if (!parse(argc, argv, usage, visible, true, vm)) return 0;
  if (!vm.count("input") || !vm.count("output"))
    throw ConfigError("command line: --input and --output are required", "expected " + usage, "");
  const std::string input = vm["input"].as<std::string>(), output = vm["output"].as<std::string>();
  if (!fs::exists(input)) throw ConfigError("command line: --input " + input + ": no such file or folder",
                                            "expected an LMDB or a folder of images", "");
  Registry registry;
  Experiment e = load(vm, registry);
  const std::string checkpoint = checkpoint_to_read(vm, e);
  LoadedModel m = load_model(e, checkpoint);

  // The input as a dataset of the image_datasets plugin, preprocessed like the test set.
  const bool is_lmdb = fs::is_regular_file(input) || fs::exists(fs::path(input) / "data.mdb");
  const std::string plugin = is_lmdb ? "lmdb" : "csv";
  const Component& component = registry.get(Kind::dataset, plugin);
  std::map<std::string, Value> options;
  const std::vector<std::string> image_datasets = {"lmdb", "image_folder", "csv"};
  if (e.test_data.component && std::count(image_datasets.begin(), image_datasets.end(), e.test_data.plugin))
    for (const auto& [k, v] : e.test_data.options.values())  // those written in the experiment
      if (k != "path" && k != "root" && k != "file" && component.schema.find(k) && e.locations.count("dataset.test." + k))
        options[k] = v;
  std::vector<std::string> files;
  const std::string list = (fs::temp_directory_path() / ("trainyard-predict-" + std::to_string(::getpid()) + ".csv")).string();
  if (is_lmdb) {
    options["path"] = input;
  } else {
    for (const auto& entry : fs::recursive_directory_iterator(input))
      if (entry.is_regular_file() && trainyard::is_image_file(entry.path().string())) files.push_back(fs::absolute(entry.path()).string());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw ConfigError("command line: --input " + input + ": no images in this folder",
                                         "expected .png, .jpg, .jpeg, .bmp or .pgm files", "");
    std::string csv = "path,label\n";
    for (const auto& f : files) csv += f + ",0\n";  // labels unknown: the column is left empty in the output
    write_file_atomic(list, csv);
    options["file"] = list;
  }
  Options validated = component_options(component.schema, options,
                                        vm.count("input-options") ? vm["input-options"].as<std::string>() : "",
                                        "--input-options");
  Context context = m.context;
  context.component = "predict input";
  auto dataset = guarded(e.test_data.component ? e.test_data : e.train_data, "construction", [&] {
    return std::get<Factory<Dataset>>(component.factory)(validated, context);
  });
  std::vector<int64_t> order(static_cast<size_t>(dataset->size()));
  std::iota(order.begin(), order.end(), 0);
  LoaderOptions lo;
  lo.batch_size = e.loop.test_batch_per_device > 0 ? e.loop.test_batch_per_device : e.loop.batch_per_device;
  lo.device = context.device;
  BatchStream batches = batch_stream(*dataset, order, 0, 0, lo, std::make_shared<LoaderStats>());
  const auto& names = m.context.dataset.class_names;
  const int64_t k = std::max<int64_t>(1, std::min<int64_t>(vm["topk"].as<int64_t>(), m.context.dataset.num_classes));
  std::string csv = "index,source,label";
  for (int64_t j = 1; j <= k; ++j) csv += ",class_" + std::to_string(j) + ",prob_" + std::to_string(j);
  csv += "\n";
  auto class_name = [&](int64_t c) { return c < static_cast<int64_t>(names.size()) ? names[size_t(c)] : std::to_string(c); };
  Network& net = m.trainer->network();
  net.eval();
  at::NoGradGuard no_grad;
  int64_t rows = 0;
  while (auto batch = batches()) {
    at::Tensor probs = m.trainer->forward(*batch).softmax(1).cpu();  // with the experiment's precision
    auto [p, idx] = probs.topk(k, 1);
    at::Tensor target = batch->target.cpu();
    for (int64_t i = 0; i < batch->size(); ++i) {
      const int64_t sample = batch->indices[size_t(i)];
      csv += std::to_string(sample) + "," + (is_lmdb ? "lmdb:" + std::to_string(sample) : files[size_t(sample)]) + "," +
             (is_lmdb ? class_name(target[i].item<int64_t>()) : std::string());
      for (int64_t j = 0; j < k; ++j)
        csv += "," + class_name(idx[i][j].item<int64_t>()) + "," + json_number(p[i][j].item<double>());
      csv += "\n";
      ++rows;
    }
  }
  if (!is_lmdb) fs::remove(list);
  write_file_atomic(output, csv);
  std::cout << "predict: " << rows << " samples from " << input << " with " << checkpoint << " -> " << output << "\n";
  return 0;
}

int report_command(int argc, char** argv) {
  const std::string usage = "trainyard report RUN_DIR";
  po::options_description visible;
  visible.add(help_option());
  po::variables_map vm;
  if (!parse_with(argc, argv, usage, visible, "run-dir", vm)) return 0;
  const std::string dir = vm["run-dir"].as<std::string>();
  if (!fs::exists(fs::path(dir) / "metrics.jsonl"))
    throw ConfigError(dir + ": not a run directory (no metrics.jsonl)", "expected e.g. runs/fashion_mnist_mlp", "");
  nlohmann::ordered_json config;
  if (fs::exists(fs::path(dir) / "config.yaml")) config = read_config_file((fs::path(dir) / "config.yaml").string());
  std::cout << "report: " << write_report(dir, plots_of_config(config)) << "\n";
  return 0;
}

int new_plugin(int argc, char** argv) {
  const std::string usage = "trainyard new-plugin NAME --kind " + join(scaffold_kinds(), "|") + " [--output DIR]";
  po::options_description own("new-plugin options");
  own.add_options()("kind", po::value<std::string>(), "the component kind")(
      "output", po::value<std::string>(), "project folder to create (default: ./NAME); must not exist or be empty");
  po::options_description visible;
  visible.add(own).add(help_option());
  po::variables_map vm;
  if (!parse_with(argc, argv, usage, visible, "name", vm)) return 0;
  if (!vm.count("kind"))
    throw ConfigError("command line: --kind is required", "expected " + usage,
                      "e.g. trainyard new-plugin my_net --kind network");
  const std::string name = vm["name"].as<std::string>();
  const auto files = plugin_project(name, vm["kind"].as<std::string>());
  const fs::path dir = vm.count("output") ? fs::path(vm["output"].as<std::string>()) : fs::path(name);
  if (fs::exists(dir) && !(fs::is_directory(dir) && fs::is_empty(dir)))
    throw ConfigError("new-plugin: " + dir.string() + " already exists and is not empty",
                      "expected a new or empty folder, so that nothing is overwritten", "pass --output DIR");
  fs::create_directories(dir);
  for (const auto& [file, text] : files) write_file_atomic((dir / file).string(), text);
  std::cout << "new-plugin: wrote " << dir.string() << "/ (" << join([&] {
    std::vector<std::string> names;
    for (const auto& [file, _] : files) names.push_back(file);
    return names;
  }()) << ")\nbuild it against an installed trainyard:\n  cmake -S " << dir.string() << " -B " << (dir / "build").string()
            << " -DCMAKE_PREFIX_PATH=PREFIX && cmake --build " << (dir / "build").string() << "\n";
  return 0;
}

int iterate(int argc, char** argv) {
  const std::string usage = "trainyard iterate EXP.yaml [--batches N] [--set KEY=VALUE]... [--plugin-dir DIR]...";
  po::options_description visible;
  po::options_description own("iterate options");
  own.add_options()("batches", po::value<int64_t>()->default_value(0), "stop after N batches (0: one epoch)");
  visible.add(own).add(experiment_options()).add(plugin_options()).add(help_option());
  po::variables_map vm;
  if (!parse(argc, argv, usage, visible, true, vm)) return 0;
  Registry registry;
  Experiment e = load(vm, registry);
  Context context = make_context(e);
  context.seed = e.seed;
  auto dataset = std::get<Factory<Dataset>>(e.train_data.component->factory);
  auto data = guarded(e.train_data, "construction", [&] { return dataset(e.train_data.options, context); });
  const EpochPlan plan = make_epoch_plan(e, data->size(), context);
  const LoaderOptions options = make_loader_options(e, e.train_data, e.loop.batch_per_device, context);
  auto stats = std::make_shared<LoaderStats>();
  const int64_t limit = vm["batches"].as<int64_t>();
  const auto t0 = std::chrono::steady_clock::now();
  BatchStream stream = batch_stream(*data, plan.indices(0), 0, 0, options, stats);
  int64_t batches = 0, samples = 0;
  while (limit == 0 || batches < limit) {
    auto batch = guarded(e.train_data, "get_batch", stream);
    if (!batch) break;
    ++batches;
    samples += batch->size();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "iterate: " << samples << " samples in " << batches << " batches, " << json_number(seconds)
            << " s, samples_per_sec " << json_number(samples / seconds) << ", decode_threads " << options.threads
            << ", bad_records " << stats->bad_records.load() << "\n";
  return 0;
}

}  // namespace

int command_main(int argc, char** argv) {
  tune_allocator();
  install_crash_reporter();
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (command == "--version") {
    std::cout << "trainyard " << TRAINYARD_VERSION << " (SDK API " << sdk_api_version() << ", "
              << TRAINYARD_FINGERPRINT << ")\n"
              << "LibTorch " << TORCH_VERSION << " (BLAS: " << loaded_blas() << "); " << cuda_summary() << "\n";
    return 0;
  }
  try {
    if (command == "run") return run(argc, argv);
    if (command == "validate") return validate(argc, argv);
    if (command == "plugins") return plugins(argc, argv);
    if (command == "describe") return describe(argc, argv);
    if (command == "convert") return convert_command(argc, argv);
    if (command == "iterate") return iterate(argc, argv);
    if (command == "find-lr") return find_lr(argc, argv);
    if (command == "sweep") return sweep(argc, argv);
    if (command == "eval") return eval_command(argc, argv);
    if (command == "predict") return predict_command(argc, argv);
    if (command == "report") return report_command(argc, argv);
    if (command == "new-plugin") return new_plugin(argc, argv);
    const std::vector<std::string> commands = {"run",   "validate", "plugins", "describe", "convert", "iterate",
                                               "find-lr", "sweep", "eval",    "predict",  "report",  "new-plugin"};
    throw ConfigError("unknown command '" + command + "'", "expected one of " + join(commands),
                      did_you_mean(command, commands));
  } catch (const ConfigError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const ComponentFailure& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const c10::Error& e) {
    std::cerr << "error: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace trainyard::host
