#pragma once
// The trainyard sub-commands, one adapter each: parse the command line, build
// the request, call the Runner or a service, print the outcome. Each returns
// the process exit code: 0 success, 2 bad input (one "error:" line on
// stderr), 1 a component crashed, 4 stopped by a signal (resumable).
#include <string>
#include <utility>
#include <vector>

namespace trainyard {
class Schema;
}

namespace trainyard::host {

/// Dispatches argv[1] to its command and maps exceptions to exit codes.
int command_main(int argc, char** argv);

int run_command(int argc, char** argv);       // run_command.cpp
int validate_command(int argc, char** argv);  // inspect_commands.cpp
int plugins_command(int argc, char** argv);
int describe_command(int argc, char** argv);
int convert_command(int argc, char** argv);  // data_commands.cpp
int iterate_command(int argc, char** argv);
int find_lr_command(int argc, char** argv);  // find_lr_command.cpp
int sweep_command(int argc, char** argv);    // sweep_command.cpp
int eval_command(int argc, char** argv);     // model_commands.cpp
int predict_command(int argc, char** argv);
int embed_command(int argc, char** argv);
int search_command(int argc, char** argv);
int export_command(int argc, char** argv);  // model_commands.cpp
int report_command(int argc, char** argv);  // project_commands.cpp
int new_plugin_command(int argc, char** argv);
int completion_command(int argc, char** argv);  // completion_command.cpp
/// `trainyard __complete CWORD WORD...`: what the bash completion offers.
int complete_command(int argc, char** argv);
/// Runs one sub-command by name (0 if there is none of that name).
int run_subcommand(const std::string& name, int argc, char** argv);
/// The sub-command names (for the usage and completion).
std::vector<std::string> command_names();

}  // namespace trainyard::host
