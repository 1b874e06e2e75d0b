// trainyard: loads component plugins, wires them as an experiment file says,
// and runs the train/test loop.
#include "cli/commands.h"
#include "distributed/communicator.h"

int main(int argc, char** argv) {
  trainyard::host::configure_nccl_environment();
  return trainyard::host::command_main(argc, argv);
}
