// trainyard: loads component plugins, wires them as an experiment file says,
// and runs the train/test loop.
#include "cli/commands.h"

int main(int argc, char** argv) { return trainyard::host::command_main(argc, argv); }
