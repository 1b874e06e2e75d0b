#pragma once
// The trainyard sub-commands. Each returns the process exit code:
// 0 success, 2 bad input (one "error:" line on stderr), 1 a component crashed.
#include <string>
#include <vector>

namespace trainyard::host {

int command_main(int argc, char** argv);

}  // namespace trainyard::host
