// trainyard validate, plugins and describe: looking without training.
#include <filesystem>
#include <iostream>

#include <torch/utils.h>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "config/sections.h"
#include "plugins/library_loader.h"
#include "run/experiment_file.h"
#include "run/runner.h"
#include "trainyard/error.h"
#include "trainyard/version.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

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

}  // namespace

int validate_command(int argc, char** argv) {
  const std::string usage = "trainyard validate EXP.yaml [--set KEY=VALUE]... [--plugin-dir DIR]...";
  const po::options_description visible = experiment_command_options(po::options_description());
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "experiment", vm)) return 0;
  Registry registry;
  Experiment e = load_experiment(vm, registry);
  Runner(e, registry).validate(std::cout);
  return 0;
}

int plugins_command(int argc, char** argv) {
  const std::string usage = "trainyard plugins [--plugin-dir DIR]...";
  po::options_description visible;
  visible.add(plugin_options()).add(help_option());
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "", vm)) return 0;
  Registry registry;
  std::vector<std::string> refused;
  auto folders = plugin_search_path({}, many<std::string>(vm, "plugin-dir"));
  load_plugin_folders(folders, registry, &refused);
  std::cout << "host: trainyard " << TRAINYARD_VERSION << ", SDK API " << sdk_api_version() << ", fingerprint "
            << TRAINYARD_FINGERPRINT << "\n";
  for (const auto& f : folders)
    std::cout << "folder: " << f.path << " (" << f.origin << (fs::is_directory(f.path) ? "" : ", absent") << ")\n";
  for (const auto& lib : registry.libraries()) {
    std::cout << "\n"
              << lib->path << "\n  " << lib->name << " " << lib->version << " (API " << lib->api_major << "."
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
  if (refused.empty()) return 0;
  std::cerr << "error: " << refused.size() << " plugin librar" << (refused.size() == 1 ? "y was" : "ies were")
            << " refused (listed above)\n";
  return 2;
}

int describe_command(int argc, char** argv) {
  const std::string usage =
      "trainyard describe NAME [--plugin-dir DIR]...\n\nNAME is a component name (mlp, sgd, ...) "
      "or a host section (loop, distributed, output, schedule, stopping).";
  po::options_description visible;
  visible.add(plugin_options()).add(help_option());
  po::variables_map vm;
  if (!parse_command_line(argc, argv, usage, visible, "name", vm)) return 0;
  const std::string name = vm["name"].as<std::string>();
  std::vector<std::string> known;
  for (const auto& [section, schema] : host_sections()) {
    known.push_back(section);
    if (name != section) continue;
    std::cout << section << " (host section)\n";
    print_schema(*schema);
    std::vector<std::string> resumable;
    for (const auto& spec : schema->specs())
      if (changeable_on_resume(section + "." + spec.key)) resumable.push_back(spec.key);
    if (!resumable.empty()) std::cout << "may change when a run resumes: " << join(resumable) << "\n";
    return 0;
  }
  Registry registry;
  const auto folders = plugin_search_path({}, many<std::string>(vm, "plugin-dir"));
  load_plugin_folders(folders, registry);
  auto found = registry.find_any(name);
  if (found.empty()) {
    for (Kind kind : kAllKinds)
      for (const auto& n : registry.names(kind)) known.push_back(n);
    const std::string maybe = did_you_mean(name, known);
    throw ConfigError("describe: '" + name + "' is neither a registered component nor a host section",
                      "expected one of " + join(known),
                      (maybe.empty() ? "" : maybe + "; ") + searched_folders_text(folders));
  }
  for (const auto* c : found) {
    std::cout << c->name << " (" << kind_name(c->kind) << ") from " << c->library->path << " " << c->library->version
              << "\n  " << c->description << "\noptions:\n";
    print_schema(c->schema);
  }
  return 0;
}

}  // namespace trainyard::host
