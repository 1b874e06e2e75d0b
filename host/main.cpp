// trainyard: loads component plugins, wires them as an experiment file says,
// and runs the train/test loop.
#include "cli/commands.h"
#include "run/launch.h"
#include "util/process.h"

namespace {
// Runs before LibTorch's static initialisers (about 0.4 s of start-up): a
// stop signal that early still ends the process with one line, not silently.
void before_libraries_start(int, char**, char**) { trainyard::host::install_early_stop_signals(); }
}  // namespace
__attribute__((section(".preinit_array"),
               used)) static void (*const early_stop_signals)(int, char**, char**) = &before_libraries_start;

int main(int argc, char** argv) {
  trainyard::host::prepare_process_environment();
  const int code = trainyard::host::command_main(argc, argv);
  trainyard::host::allow_exit();  // from here exit() is the host's own
  return code;
}
