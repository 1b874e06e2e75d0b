// trainyard eval, predict, export, embed and search: a trained checkpoint put to use.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <vector>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "formats/metrics.h"
#include "run/experiment_file.h"
#include "run/runner.h"
#include "trainyard/error.h"
#include "util/files.h"
#include "util/json.h"
#include "util/text.h"

namespace trainyard::host {

namespace {
// eval's and export's --weights.
constexpr const char* kWeightsHelp = "trained, or ema: the checkpoint's averaged weights (a run with ema.enabled)";

// export --output must not replace what the run itself reads: its checkpoints,
// config.yaml, provenance.json and the other files trainyard keeps in the run
// directory, the checkpoint being exported, or the experiment file.
void refuse_run_files(const std::string& output, const std::string& run_dir, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto same = [&](const fs::path& a, const fs::path& b) {
    return fs::weakly_canonical(a, ec).lexically_normal() == fs::weakly_canonical(b, ec).lexically_normal();
  };
  const fs::path out = fs::weakly_canonical(output, ec).lexically_normal();
  std::optional<std::string> what;
  const fs::path run = fs::weakly_canonical(run_dir, ec).lexically_normal();
  if (out.parent_path() == run)
    for (const char* own : {"config.yaml", "provenance.json", "metrics.jsonl", "summary.json"})
      if (out.filename() == own) what = (fs::path(run_dir) / own).string() + ", the run's own " + own;
  if (!what && (out.parent_path() == run / "checkpoints" || out == fs::path(run.string() + ".lock")))
    what = out.string() + ", one of the run's own files";
  for (const auto& input : inputs)
    if (!what && !input.empty() && same(out, input)) what = input;
  if (what)
    throw ConfigError("command line: --output " + output + ": would replace " + *what,
                      "expected a file that is not one of the run's inputs (its checkpoints, config.yaml, "
                      "provenance.json, the experiment file)",
                      "write the export elsewhere, e.g. " + (fs::path(run_dir) / "model.pt").string());
}
}  // namespace

int eval_command(int argc, char** argv) {
  const std::string usage =
      "trainyard eval EXP.yaml [--checkpoint PATH] [--weights trained|ema] [--output FILE.json] "
      "[--output-dir DIR] [--set KEY=VALUE]... [--plugin-dir DIR]...";
  po::options_description own("eval options");
  own.add_options()("checkpoint", po::value<std::string>(), "checkpoint to evaluate (default: the run's latest)")(
      "weights", po::value<std::string>()->default_value("trained"), kWeightsHelp)(
      "output-dir", po::value<std::string>(), "folder of run directories (default: output.dir)")(
      "output", po::value<std::string>(), "also write the values as JSON to this file");
  const po::options_description visible = experiment_command_options(own);
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "experiment", vm)) return 0;
  Registry registry;
  const Experiment e = load_experiment(vm, registry);
  const Runner runner(e, registry);
  const std::string checkpoint = runner.checkpoint_to_read(maybe<std::string>(vm, "checkpoint"),
                                                           maybe<std::string>(vm, "output-dir").value_or(""));
  const MeterValues values = runner.evaluate(checkpoint, vm["weights"].as<std::string>());
  std::cout << "eval: " << checkpoint << ":";
  for (const auto& [k, v] : values) std::cout << " " << k << "=" << json_number(v);
  std::cout << "\n";
  if (auto output = maybe<std::string>(vm, "output")) {
    nlohmann::ordered_json j;
    j["checkpoint"] = checkpoint;
    j["values"] = parse_json(encode_values(values));
    write_file_atomic(*output, json_text(j) + "\n");
  }
  return 0;
}

int export_command(int argc, char** argv) {
  const std::string usage = "trainyard export RUN_DIR|EXP.yaml --format " + join(export_format_names(), "|") +
                            " --output FILE [--checkpoint PATH] "
                            "[--weights trained|ema] "
                            "[--output-dir DIR] [--set KEY=VALUE]... [--plugin-dir DIR]...";
  std::string format_help;  // "state_dict: ...; safetensors: ...; torchscript: ..."
  for (const auto& f : export_formats())
    format_help += (format_help.empty() ? "" : "; ") + std::string(f.name) + ": " + f.description;
  po::options_description own("export options");
  own.add_options()("format", po::value<std::string>()->default_value(export_formats().front().name),
                    format_help.c_str())("output", po::value<std::string>(), "the file to write")(
      "checkpoint", po::value<std::string>(), "weights to export (default: the run's latest checkpoint)")(
      "weights", po::value<std::string>()->default_value("trained"), kWeightsHelp)(
      "output-dir", po::value<std::string>(), "folder of run directories (default: output.dir)");
  const po::options_description visible = experiment_command_options(own);
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "experiment", vm)) return 0;
  if (!vm.count("output")) throw ConfigError("command line: --output is required", "expected " + usage, "");
  ExportRequest request;
  request.format = vm["format"].as<std::string>();
  request.weights = vm["weights"].as<std::string>();
  request.output = vm["output"].as<std::string>();
  check_output_file(request.output, "command line: --output " + request.output);
  // A run directory stands for its saved experiment (config.yaml) and its checkpoints.
  std::string experiment = vm["experiment"].as<std::string>();
  std::string output_dir = maybe<std::string>(vm, "output-dir").value_or("");
  if (std::filesystem::is_directory(experiment)) {
    const std::filesystem::path run_dir = std::filesystem::absolute(experiment).lexically_normal();
    if (!std::filesystem::exists(run_dir / "config.yaml"))
      throw ConfigError("command line: " + experiment + ": no config.yaml in this folder",
                        "expected a run directory written by trainyard run, or an experiment file", "");
    experiment = (run_dir / "config.yaml").string();
    if (output_dir.empty()) output_dir = run_dir.parent_path().string();
  }
  Registry registry;
  const Experiment e =
      load_experiment(experiment, many<std::string>(vm, "set"), many<std::string>(vm, "plugin-dir"), registry);
  const Runner runner(e, registry);
  request.checkpoint = runner.checkpoint_to_read(maybe<std::string>(vm, "checkpoint"), output_dir);
  refuse_run_files(request.output, runner.run_directory(output_dir),
                   {request.checkpoint, experiment, vm["experiment"].as<std::string>()});
  const size_t tensors = runner.export_network(request);
  std::cout << "export: " << tensors << " tensors of " << request.checkpoint << " -> " << request.output << " ("
            << request.format << ")\n";
  return 0;
}

int predict_command(int argc, char** argv) {
  const std::string usage =
      "trainyard predict EXP.yaml --input LMDB_OR_FOLDER --output preds.csv [--checkpoint PATH] [--topk K] "
      "[--input-options YAML] [--set KEY=VALUE]... [--plugin-dir DIR]...";
  po::options_description own("predict options");
  own.add_options()("input", po::value<std::string>(), "an LMDB made by trainyard convert, or a folder of images")(
      "output", po::value<std::string>(),
      "CSV to write: one row per input sample; for a network that scores every pixel, a new folder of PNG masks "
      "(class ids at each image's size) and predictions.csv; for a detector, a new folder of results.json (COCO "
      "results in each image's pixels), images.json and predictions.csv")(
      "checkpoint", po::value<std::string>(), "weights to use (default: the run's latest checkpoint)")(
      "output-dir", po::value<std::string>(), "folder of run directories (default: output.dir)")(
      "topk", ranged<int64_t>("topk", 1, 1000)->default_value(5), "classes per row, most probable first")(
      "input-options", po::value<std::string>(),
      "YAML map of preprocessing options for the input (default: those of dataset.test when it is an lmdb, "
      "image_folder or csv dataset), e.g. '{mean: [0.286], std: [0.353]}'");
  const po::options_description visible = experiment_command_options(own);
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "experiment", vm)) return 0;
  if (!vm.count("input") || !vm.count("output"))
    throw ConfigError("command line: --input and --output are required", "expected " + usage, "");
  PredictRequest request;
  request.input = vm["input"].as<std::string>();
  request.output = vm["output"].as<std::string>();
  request.topk = vm["topk"].as<int64_t>();
  request.input_options = maybe<std::string>(vm, "input-options").value_or("");
  if (!std::filesystem::exists(request.input))
    throw ConfigError("command line: --input " + request.input + ": no such file or folder",
                      "expected an LMDB or a folder of images", "");
  Registry registry;
  const Experiment e = load_experiment(vm, registry);
  const Runner runner(e, registry);
  request.checkpoint = runner.checkpoint_to_read(maybe<std::string>(vm, "checkpoint"),
                                                 maybe<std::string>(vm, "output-dir").value_or(""));
  const int64_t rows = runner.predict(request);
  std::cout << "predict: " << rows << " samples from " << request.input << " with " << request.checkpoint << " -> "
            << request.output << "\n";
  return 0;
}

int embed_command(int argc, char** argv) {
  const std::string usage =
      "trainyard embed EXP.yaml --output CATALOG [--input LMDB_OR_FOLDER] [--checkpoint PATH] [--input-options YAML] "
      "[--set KEY=VALUE]... [--plugin-dir DIR]...";
  po::options_description own("embed options");
  own.add_options()("output", po::value<std::string>(), "the catalog folder to write (must not exist)")(
      "input", po::value<std::string>(),
      "an LMDB made by trainyard convert, or a folder of images (default: the experiment's test split, else its "
      "training split)")("checkpoint", po::value<std::string>(),
                         "weights to use (default: the run's latest checkpoint)")(
      "output-dir", po::value<std::string>(), "folder of run directories (default: output.dir)")(
      "input-options", po::value<std::string>(),
      "YAML map of preprocessing options for --input (default: those of dataset.test)");
  const po::options_description visible = experiment_command_options(own);
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "experiment", vm)) return 0;
  if (!vm.count("output")) throw ConfigError("command line: --output is required", "expected " + usage, "");
  EmbedRequest request;
  request.output = vm["output"].as<std::string>();
  request.input = maybe<std::string>(vm, "input").value_or("");
  request.input_options = maybe<std::string>(vm, "input-options").value_or("");
  if (!request.input.empty() && !std::filesystem::exists(request.input))
    throw ConfigError("command line: --input " + request.input + ": no such file or folder",
                      "expected an LMDB or a folder of images", "");
  request.experiment_file = vm["experiment"].as<std::string>();
  request.sets = many<std::string>(vm, "set");
  request.plugin_dirs = many<std::string>(vm, "plugin-dir");
  Registry registry;
  const Experiment e = load_experiment(vm, registry);
  const Runner runner(e, registry);
  request.checkpoint = runner.checkpoint_to_read(maybe<std::string>(vm, "checkpoint"),
                                                 maybe<std::string>(vm, "output-dir").value_or(""));
  const int64_t items = runner.embed(request);
  std::cout << "embed: " << items << " items from "
            << (request.input.empty() ? "the experiment's test split" : request.input) << " with " << request.checkpoint
            << " -> " << request.output << "\n";
  return 0;
}

int search_command(int argc, char** argv) {
  const std::string usage =
      "trainyard search CATALOG --query IMAGE... [--top-k K] [--distance euclidean|cosine] [--output DIR] "
      "[--checkpoint PATH] [--plugin-dir DIR]...";
  po::options_description own("search options");
  own.add_options()("query", po::value<std::vector<std::string>>()->multitoken(), "image files to look up")(
      "top-k", ranged<int64_t>("top-k", 1, 10000)->default_value(10), "nearest items per query")(
      "distance", po::value<std::string>()->default_value("euclidean"),
      "euclidean (smaller is nearer) or cosine (larger is nearer)")(
      "output", po::value<std::string>()->default_value("search"), "folder for search.csv and search.html")(
      "checkpoint", po::value<std::string>(), "weights that embed the queries (default: those that made the catalog)");
  po::options_description visible;
  visible.add(own).add(plugin_options()).add(help_option());
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "catalog", vm)) return 0;
  if (!vm.count("query") || vm["query"].as<std::vector<std::string>>().empty())
    throw ConfigError("command line: --query is required", "expected " + usage, "");
  SearchRequest request;
  request.queries = vm["query"].as<std::vector<std::string>>();
  request.top_k = vm["top-k"].as<int64_t>();
  request.distance = vm["distance"].as<std::string>();
  if (request.distance != "euclidean" && request.distance != "cosine")
    throw ConfigError("command line: --distance " + request.distance, "expected euclidean or cosine", "");
  request.output_dir = vm["output"].as<std::string>();
  request.checkpoint = maybe<std::string>(vm, "checkpoint").value_or("");
  const CatalogInfo catalog = read_catalog_info(vm["catalog"].as<std::string>());
  // Plugin folders come from the user, as for run: a catalog is data, and
  // the folders it records (embed's --plugin-dir) are only named in a hint.
  const std::vector<std::string> plugin_dirs = many<std::string>(vm, "plugin-dir");
  if (!std::filesystem::is_regular_file(catalog.experiment_file))
    throw ConfigError(catalog.dir + "/catalog.json: experiment " + catalog.experiment_file + " no longer exists",
                      "expected the experiment file the catalog was embedded with", "");
  Registry registry;
  Experiment e;
  try {
    e = load_experiment(catalog.experiment_file, catalog.sets, plugin_dirs, registry);
  } catch (const ConfigError& err) {
    std::vector<std::string> given, not_given;
    for (const auto& d : plugin_dirs) given.push_back(std::filesystem::absolute(d).lexically_normal().string());
    for (const auto& d : catalog.plugin_dirs)
      if (std::find(given.begin(), given.end(), std::filesystem::path(d).lexically_normal().string()) == given.end())
        not_given.push_back(d);
    if (not_given.empty()) throw;
    throw ConfigError(std::string(err.what()) + " (the catalog was embedded with --plugin-dir " + join(not_given) +
                      "; search loads plugins only from the folders you give: add --plugin-dir for those you trust)");
  }
  Runner(e, registry).search(catalog, request, std::cout);
  std::cout << "search: " << request.output_dir << "/search.csv, " << request.output_dir << "/search.html\n";
  return 0;
}

}  // namespace trainyard::host
