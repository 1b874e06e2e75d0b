// trainyard report and new-plugin: files around runs and plugins.
#include <filesystem>
#include <iostream>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "config/snapshot.h"
#include "report/report.h"
#include "scaffold/scaffold.h"
#include "trainyard/error.h"
#include "util/files.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {

int report_command(int argc, char** argv) {
  const std::string usage = "trainyard report RUN_DIR";
  po::options_description visible;
  visible.add(help_option());
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "run-dir", vm)) return 0;
  const std::string dir = vm["run-dir"].as<std::string>();
  if (!fs::exists(fs::path(dir) / "metrics.jsonl"))
    throw ConfigError(dir + ": not a run directory (no metrics.jsonl)", "expected e.g. runs/fashion_mnist_mlp", "");
  std::cout << "report: " << write_report(dir, saved_plots((fs::path(dir) / "config.yaml").string())) << "\n";
  return 0;
}

int new_plugin_command(int argc, char** argv) {
  const std::string usage = "trainyard new-plugin NAME --kind " + join(scaffold_kinds(), "|") + " [--output DIR]";
  po::options_description own("new-plugin options");
  own.add_options()("kind", po::value<std::string>(), "the component kind")(
      "output", po::value<std::string>(), "project folder to create (default: ./NAME); must not exist or be empty");
  po::options_description visible;
  visible.add(own).add(help_option());
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "name", vm)) return 0;
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
  std::vector<std::string> names;
  for (const auto& [file, text] : files) write_file_atomic((dir / file).string(), text), names.push_back(file);
  std::cout << "new-plugin: wrote " << dir.string() << "/ (" << join(names)
            << ")\nbuild it against an installed trainyard:\n"
            << "  cmake -S " << dir.string() << " -B " << (dir / "build").string()
            << " -DCMAKE_PREFIX_PATH=PREFIX && cmake --build " << (dir / "build").string() << "\n";
  return 0;
}

}  // namespace trainyard::host
