// trainyard: loads component plugins, wires them as an experiment file says,
// and runs the train/test loop.
#include "cli/commands.h"
#include "run/launch.h"
#include "util/process.h"

int main(int argc, char** argv) {
  trainyard::host::prepare_process_environment();
  const int code = trainyard::host::command_main(argc, argv);
  trainyard::host::allow_exit();  // from here exit() is the host's own
  return code;
}
