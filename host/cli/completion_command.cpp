// trainyard completion bash, and the hidden `trainyard __complete` it calls:
// commands, each command's flags (read from its own --help, so they never
// drift), `--set` keys (the host sections', and with an experiment on the
// line its components' options), component names after `describe` and for
// `--set KIND.plugin=`, and the values of enumerated flags. Anything else
// falls back to file names.
#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "config/experiment.h"
#include "config/sections.h"
#include "plugins/library_loader.h"
#include "run/experiment_file.h"
#include "run/mode_requests.h"
#include "trainyard/error.h"
#include "trainyard/trusted_code.h"
#include "util/text.h"

namespace trainyard::host {
namespace {

const char* kBashScript = R"BASH(# bash completion for trainyard: source <(trainyard completion bash)
_trainyard() {
  local IFS=$'\n' candidates
  candidates=$("${COMP_WORDS[0]}" __complete "$COMP_CWORD" "${COMP_WORDS[@]}" 2>/dev/null)
  if [ -z "$candidates" ]; then
    compopt -o default 2>/dev/null
    COMPREPLY=()
    return
  fi
  COMPREPLY=($(compgen -W "$candidates" -- "${COMP_WORDS[COMP_CWORD]}"))
  # a key completed up to its '=' waits for the value
  if [ ${#COMPREPLY[@]} -eq 1 ] && [[ ${COMPREPLY[0]} == *= ]]; then compopt -o nospace 2>/dev/null; fi
}
complete -F _trainyard trainyard
)BASH";

// The flags a command's --help lists.
std::vector<std::string> flags_of(const std::string& command) {
  std::ostringstream captured;
  std::streambuf* saved = std::cout.rdbuf(captured.rdbuf());
  std::string name = command, help = "--help", self = "trainyard";
  char* argv[] = {self.data(), name.data(), help.data(), nullptr};
  try {
    run_subcommand(command, 3, argv);
  } catch (...) {}
  std::cout.rdbuf(saved);
  std::set<std::string> flags;
  static const std::regex flag("--[a-z][a-z0-9-]*");
  const std::string text = captured.str();
  for (auto m = std::sregex_iterator(text.begin(), text.end(), flag); m != std::sregex_iterator(); ++m)
    flags.insert(m->str());
  return {flags.begin(), flags.end()};
}

void keys_of(const Schema& schema, const std::string& prefix, std::vector<std::string>& out) {
  for (const auto& spec : schema.specs()) out.push_back(prefix + spec.key + "=");
}

// --set keys: the host sections', then (with a readable experiment on the
// line) every component entry's plugin and options.
std::vector<std::string> set_keys(const std::vector<std::string>& words) {
  std::vector<std::string> keys;
  for (const auto& [section, schema] : host_sections()) keys_of(*schema, section + ".", keys);
  for (const auto& word : words) {
    if (word.size() < 5 || (word.substr(word.size() - 5) != ".yaml" && word.substr(word.size() - 4) != ".yml"))
      continue;
    try {
      Registry registry;
      // A TAB press must not run code someone else put in reach: the
      // experiment's own plugin folders are loaded only when the file that
      // names them is trusted as a plugin library would be (the user's or
      // root's, writable by nobody else) and no insecure override is on.
      ExperimentSource source = read_experiment(word, {});
      const bool trusted = untrusted_because(word).empty() && !insecure_code_allowed();
      load_plugin_folders(plugin_search_path(trusted ? experiment_plugin_dirs(source) : std::vector<std::string>{}, {}),
                          registry);
      Experiment e = validate_experiment(std::move(source), registry);
      for (const ComponentConfig* c : {&e.train_data, &e.test_data, &e.network, &e.loss, &e.optimizer}) {
        if (!c->component) continue;
        keys.push_back(c->key + ".plugin=");
        keys_of(c->component->schema, c->key + ".", keys);
      }
    } catch (const std::exception&) {
      // an experiment that does not load yet: the host keys only
    }
    break;
  }
  return keys;
}

std::vector<std::string> component_names(std::optional<Kind> kind) {
  std::vector<std::string> names;
  try {
    Registry registry;
    load_plugin_folders(plugin_search_path({}, {}), registry);
    for (Kind k : kAllKinds)
      if (!kind || *kind == k)
        for (const auto& n : registry.names(k)) names.push_back(n);
  } catch (const std::exception&) {}
  return names;
}

}  // namespace

int completion_command(int argc, char** argv) {
  if (argc != 3 || std::string(argv[2]) != "bash")
    throw ConfigError("command line: trainyard completion" + std::string(argc > 2 ? " " + std::string(argv[2]) : ""),
                      "expected trainyard completion bash",
                      "then: source <(trainyard completion bash), or save it "
                      "as /etc/bash_completion.d/trainyard");
  std::cout << kBashScript;
  return 0;
}

int complete_command(int argc, char** argv) {
  // argv: trainyard __complete CWORD WORD0 WORD1 ... (WORD0 is the program)
  if (argc < 4) return 0;
  const size_t cword = static_cast<size_t>(std::max(0, std::atoi(argv[2])));
  std::vector<std::string> words(argv + 3, argv + argc);
  if (cword >= words.size()) words.resize(cword + 1);
  const std::string prev = cword >= 1 ? words[cword - 1] : "";
  std::vector<std::string> out;
  if (cword == 1) {
    out = command_names();
    out.insert(out.end(), {"--help", "--version"});
  } else {
    const std::string command = words[1];
    // "--set network.plugin=" arrives as "--set" "network.plugin" "=" (bash splits at '=').
    const bool after_equals = prev == "=" || words[cword] == "=";
    const size_t key_at = words[cword] == "=" ? cword - 1 : cword - 2;
    if (after_equals && key_at >= 1 && key_at < words.size() && words[key_at - 1] == "--set") {
      const std::string key = words[key_at];
      static const std::map<std::string, Kind> kinds = {{"network.plugin", Kind::network},
                                                        {"loss.plugin", Kind::loss},
                                                        {"optimizer.plugin", Kind::optimizer},
                                                        {"dataset.train.plugin", Kind::dataset},
                                                        {"dataset.test.plugin", Kind::dataset}};
      if (auto it = kinds.find(key); it != kinds.end()) out = component_names(it->second);
    } else if (prev == "--set") {
      out = set_keys(words);
    } else if (command == "describe" && cword == 2) {
      out = component_names(std::nullopt);
      for (const auto& [section, schema] : host_sections()) out.push_back(section);
    } else if (command == "completion" && cword == 2) {
      out = {"bash"};
    } else if (prev == "--format") {
      out = export_format_names();  // export's only --format
    } else if (prev == "--mode") {
      out = {"restart", "sweep"};
    } else if (prev == "--kind") {
      out = {"network", "dataset", "loss", "optimizer", "meter", "callback", "additional_override"};
    } else if (prev == "--from") {
      out = {"folder", "csv", "idx", "parallel"};
    } else if (words[cword].rfind("-", 0) == 0) {
      out = flags_of(command);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  for (const auto& candidate : out) std::cout << candidate << "\n";
  return 0;
}

}  // namespace trainyard::host
