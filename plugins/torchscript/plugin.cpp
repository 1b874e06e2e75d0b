// torchscript: a network loaded from a TorchScript file (torch.jit.script or
// torch.jit.trace, then .save() in Python), trained and checkpointed by the
// host like any other network.
//
// The script module's parameters and buffers are registered, as the same
// tensors, in a tree of torch::nn::Modules that mirrors the script module's
// submodules. Parameter names are therefore Python's ("features.0.weight"),
// network.freeze and network.trainable work on them, and the optimizer, the
// checkpoint and .to(device) act on the tensors the script computes with.
#include <filesystem>

#include <torch/script.h>
#include <trainyard/error.h>
#include <trainyard/network.h>
#include <trainyard/plugin.h>
#include <trainyard/trusted_code.h>

namespace {

class Mirror : public torch::nn::Module {
 public:
  explicit Mirror(torch::jit::Module script) : script_(std::move(script)) {
    for (const auto& p : script_.named_parameters(/*recurse=*/false))
      register_parameter(p.name, p.value, p.value.requires_grad());
    for (const auto& b : script_.named_buffers(/*recurse=*/false)) register_buffer(b.name, b.value);
    for (const auto& child : script_.named_children())
      register_module(child.name, std::make_shared<Mirror>(child.value));
  }

  // Train/eval reaches each script submodule through its mirror, so that a
  // frozen submodule (put in eval by the host) stays in eval in the script.
  void train(bool on) override {
    torch::nn::Module::train(on);  // children first, through their own train()
    if (script_.hasattr("training")) script_.setattr("training", on);
  }

 protected:
  torch::jit::Module script_;
};

class TorchScriptNetwork : public trainyard::Network, public trainyard::ScriptedModule {
 public:
  TorchScriptNetwork(torch::jit::Module script, std::string path)
      : mirror_(std::make_shared<Mirror>(script)), script_(script), path_(std::move(path)) {
    // The mirror's children become this network's children (no extra name level).
    for (const auto& p : mirror_->named_parameters(false))
      register_parameter(p.key(), p.value(), p.value().requires_grad());
    for (const auto& b : mirror_->named_buffers(false)) register_buffer(b.key(), b.value());
    for (const auto& child : mirror_->named_children()) register_module(child.key(), child.value());
  }

  void train(bool on) override {
    torch::nn::Module::train(on);
    if (script_.hasattr("training")) script_.setattr("training", on);
  }

  at::Tensor forward(const trainyard::Batch& batch) override {
    c10::IValue out = script_.forward({batch.input});
    if (out.isTensor()) return out.toTensor();
    if (out.isTuple() && !out.toTupleRef().elements().empty() && out.toTupleRef().elements()[0].isTensor())
      return out.toTupleRef().elements()[0].toTensor();  // (logits, ...): the first output trains
    throw trainyard::Error("the TorchScript module's forward returned " + out.tagKind() +
                           "; expected a tensor or a tuple whose first element is a tensor");
  }
  // export --format torchscript writes this file back with the trained values.
  std::string script_path() const override { return path_; }

 private:
  std::shared_ptr<Mirror> mirror_;
  torch::jit::Module script_;
  std::string path_;
};

struct TorchScriptOptions {
  std::string path;  // absolute: the host resolves it against the experiment file's folder
};

const trainyard::TypedSchema<TorchScriptOptions>& schema() {
  static const trainyard::TypedSchema<TorchScriptOptions> s = [] {
    trainyard::TypedSchema<TorchScriptOptions> t;
    t.require_path("path", &TorchScriptOptions::path,
                   "TorchScript file (.pt) saved from Python with torch.jit.script(model).save(path) or "
                   "torch.jit.trace(...).save(path); relative to the experiment file");
    return t;
  }();
  return s;
}

std::shared_ptr<trainyard::Network> make(const trainyard::Options& o, const trainyard::Context& context) {
  const std::string path = schema().bind(o).path;
  if (!std::filesystem::is_regular_file(path))
    throw trainyard::ConfigError("TorchScript file '" + path + "' does not exist",
                                 "expected a file saved by torch.jit.script(model).save(path)",
                                 "a relative path is taken from the experiment file's folder");
  // A TorchScript file is code: loaded only when no stranger can change it.
  if (const std::string warning = trainyard::check_trusted_code(path, "TorchScript file"); !warning.empty())
    context.log(warning);
  torch::jit::Module script;
  try {
    script = torch::jit::load(path, context.device);
  } catch (const c10::Error& e) {
    throw trainyard::ConfigError("'" + path + "' is not a loadable TorchScript file",
                                 "expected a file saved by torch.jit.script(model).save(path)",
                                 std::string(e.what_without_backtrace()).substr(0, 200));
  }
  script.train();
  return std::make_shared<TorchScriptNetwork>(script, path);
}

void register_components(trainyard::Registrar& r) {
  r.add_network("torchscript", "a network exported from Python as TorchScript (torch.jit.script or trace)",
                schema().schema(), make);
}

}  // namespace

TRAINYARD_PLUGIN("torchscript", "1.0.0", "networks exported from PyTorch as TorchScript", register_components)
