#include "fake_registry.h"

#include <unistd.h>

#include <fstream>
#include <memory>

namespace fuzz {

using trainyard::Schema;
using trainyard::host::Component;
using trainyard::host::Kind;

const trainyard::host::Registry& registry() {
  static const trainyard::host::Registry r = [] {
    trainyard::host::Registry reg;
    auto lib = std::make_shared<trainyard::host::LibraryInfo>();
    lib->path = "/fuzz/libfake.so";
    lib->name = "fake";
    lib->version = "1.0.0";
    std::vector<Component> components;
    auto add = [&](Kind kind, const std::string& name, Schema schema) {
      Component c{kind, name, "fuzz stand-in", std::move(schema), lib, {}};
      components.push_back(std::move(c));
    };
    Schema synthetic;
    synthetic.add("size", 512, "samples").min(1);
    synthetic.add("num_classes", 4, "classes").min(2);
    synthetic.add("shape", std::vector<int64_t>{1, 4, 4}, "sample shape").min(1);
    synthetic.add("seed", 0, "seed").min(0);
    add(Kind::dataset, "synthetic", synthetic);
    Schema mlp;
    mlp.add("hidden_sizes", std::vector<int64_t>{256, 128}, "widths").min(1);
    mlp.add("activation", "relu", "activation").one_of({"relu", "tanh", "gelu", "sigmoid"});
    mlp.add("dropout", 0.0, "dropout").range(0.0, 0.99);
    add(Kind::network, "mlp", mlp);
    Schema ce;
    ce.add("label_smoothing", 0.0, "smoothing").range(0.0, 1.0);
    add(Kind::loss, "cross_entropy", ce);
    Schema sgd;
    sgd.add("lr", 0.01, "rate").min(0.0);
    sgd.add("momentum", 0.0, "momentum").range(0.0, 1.0);
    sgd.add("nesterov", false, "nesterov");
    sgd.add("weight_decay", 0.0, "decay").min(0.0);
    add(Kind::optimizer, "sgd", sgd);
    add(Kind::meter, "loss", Schema());
    Schema topk;
    topk.add("k", std::vector<int64_t>{1}, "k").min(1);
    add(Kind::meter, "topk_accuracy", topk);
    Schema console;
    console.add("refresh_secs", 0.5, "refresh").min(0.0);
    add(Kind::callback, "console", console);
    Schema overfit;
    overfit.add("batches", 1, "batches").min(1);
    add(Kind::additional_override, "overfit_batches", overfit);
    reg.add_library(lib, std::move(components));
    return reg;
  }();
  return r;
}

std::string scratch(const std::string& name) { return "/tmp/trainyard-fuzz-" + std::to_string(::getpid()) + "-" + name; }

void write(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
}

}  // namespace fuzz
