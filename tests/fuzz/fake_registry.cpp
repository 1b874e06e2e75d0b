#include "fake_registry.h"

#include <unistd.h>

#include <fstream>
#include <memory>
#include <type_traits>

namespace fuzz {

using trainyard::Schema;
using trainyard::host::Component;
using trainyard::host::Kind;

// An optional key with its default, declared as SDK 1.0 plugins did with
// Schema::add (deprecated since; this stand-in only needs the same specs).
template <class T>
trainyard::OptionSpec& optional(Schema& schema, const std::string& key, T value, const std::string& description) {
  trainyard::Value v;
  if constexpr (std::is_same_v<T, const char*>)
    v = std::string(value);
  else if constexpr (std::is_same_v<T, int>)
    v = static_cast<int64_t>(value);
  else
    v = std::move(value);
  trainyard::OptionSpec& spec = schema.require(key, trainyard::type_of(v), description);
  spec.default_value = std::move(v);
  return spec;
}

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
    optional(synthetic, "size", 512, "samples").min(1);
    optional(synthetic, "num_classes", 4, "classes").min(2);
    optional(synthetic, "shape", std::vector<int64_t>{1, 4, 4}, "sample shape").min(1);
    optional(synthetic, "seed", 0, "seed").min(0);
    add(Kind::dataset, "synthetic", synthetic);
    Schema mlp;
    optional(mlp, "hidden_sizes", std::vector<int64_t>{256, 128}, "widths").min(1);
    optional(mlp, "activation", "relu", "activation").one_of({"relu", "tanh", "gelu", "sigmoid"});
    optional(mlp, "dropout", 0.0, "dropout").range(0.0, 0.99);
    add(Kind::network, "mlp", mlp);
    Schema ce;
    optional(ce, "label_smoothing", 0.0, "smoothing").range(0.0, 1.0);
    add(Kind::loss, "cross_entropy", ce);
    Schema sgd;
    optional(sgd, "lr", 0.01, "rate").min(0.0);
    optional(sgd, "momentum", 0.0, "momentum").range(0.0, 1.0);
    optional(sgd, "nesterov", false, "nesterov");
    optional(sgd, "weight_decay", 0.0, "decay").min(0.0);
    add(Kind::optimizer, "sgd", sgd);
    add(Kind::meter, "loss", Schema());
    Schema topk;
    optional(topk, "k", std::vector<int64_t>{1}, "k").min(1);
    add(Kind::meter, "topk_accuracy", topk);
    Schema console;
    optional(console, "refresh_secs", 0.5, "refresh").min(0.0);
    add(Kind::callback, "console", console);
    Schema overfit;
    optional(overfit, "batches", 1, "batches").min(1);
    add(Kind::additional_override, "overfit_batches", overfit);
    reg.add_library(lib, std::move(components));
    return reg;
  }();
  return r;
}

std::string scratch(const std::string& name) {
  return "/tmp/trainyard-fuzz-" + std::to_string(::getpid()) + "-" + name;
}

void write(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), std::streamsize(size));
}

}  // namespace fuzz
