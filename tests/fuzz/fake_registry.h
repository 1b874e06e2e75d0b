#pragma once
// Components with the built-in plugins' names and schemas, registered without
// loading any library (validation never calls a factory), and the files the
// targets write their inputs to.
#include <string>

#include "plugins/registry.h"

namespace fuzz {

const trainyard::host::Registry& registry();
/// A file name unique to this process under /tmp.
std::string scratch(const std::string& name);
void write(const std::string& path, const uint8_t* data, size_t size);

}  // namespace fuzz
