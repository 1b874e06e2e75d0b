// Any lines as --set KEY=VALUE arguments on a valid experiment.
#include <cstring>
#include <sstream>

#include "config/experiment.h"
#include "fake_registry.h"
#include "trainyard/error.h"

namespace {
const char* kBase =
    "name: fuzz\n"
    "dataset:\n  train: {plugin: synthetic, size: 64}\n  test: {plugin: synthetic, size: 16, seed: 1}\n"
    "network: {plugin: mlp, hidden_sizes: [8]}\nloss: {plugin: cross_entropy}\n"
    "optimizer: {plugin: sgd, lr: 0.1}\nmeters: [{plugin: loss}, {plugin: topk_accuracy, k: [1, 2]}]\n"
    "loop: {epochs: 2, batch_per_device: 8}\nstages: [{name: a}, {name: b, optimizer: {lr: 0.01}}]\n";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    std::string p = fuzz::scratch("set-base.yaml");
    fuzz::write(p, reinterpret_cast<const uint8_t*>(kBase), std::strlen(kBase));
    return p;
  }();
  std::vector<std::string> sets;
  std::istringstream lines(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; std::getline(lines, line) && sets.size() < 8;) sets.push_back(line);
  try {
    auto e = trainyard::host::validate_experiment(trainyard::host::read_experiment(path, sets), fuzz::registry());
    (void)e.resolved();
  } catch (const trainyard::Error&) {}
  return 0;
}
