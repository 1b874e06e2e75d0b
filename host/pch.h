// Precompiled once by the lowest layer (util) and reused by every host layer
// and the tests: the LibTorch headers cost most of a compile. No yaml-cpp:
// only config/ uses it.
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <nlohmann/json.hpp>
