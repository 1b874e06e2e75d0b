// The LibTorch headers most built-in plugins include, precompiled once for
// them all (plugins/CMakeLists.txt): they cost most of each plugin's
// compile. A build accelerator only: every plugin source still includes
// what it uses, as a plugin built outside (trainyard_add_plugin, no
// precompiled header) must; -DTRAINYARD_PLUGIN_PCH=OFF builds them so.
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/optimizer.h>
