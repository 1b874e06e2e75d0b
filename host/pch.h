// Precompiled for every host translation unit (and reused by the tests):
// the LibTorch headers cost most of a compile.
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>
