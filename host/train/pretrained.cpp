// `pretrained:`: a network's parameters and buffers initialized by name from
// a trainyard checkpoint, a torch::save'd module or a PyTorch state_dict.
#include "train/pretrained.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include <torch/serialize.h>
#include <torch/serialize/input-archive.h>

#include "trainyard/error.h"
#include "trainyard/network.h"
#include "util/shape.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {

namespace {

std::string shape_text(const at::Tensor& t) { return host::shape_text(t.sizes()); }

// Walks the module tree and the archive side by side.
void match(torch::nn::Module& module, torch::serialize::InputArchive& archive, const std::string& prefix,
           PretrainedReport& report, std::vector<std::string>& shape_errors) {
  std::vector<std::string> keys = archive.keys();
  auto has_key = [&](const std::string& k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
  std::vector<std::string> own;
  auto load_tensor = [&](const std::string& name, at::Tensor& target, bool is_buffer) {
    own.push_back(name);
    at::Tensor value;
    if (!has_key(name) || !archive.try_read(name, value, is_buffer)) {
      report.missing.push_back(prefix + name);
      return;
    }
    if (value.sizes() != target.sizes()) {
      shape_errors.push_back(prefix + name + " (file " + shape_text(value) + ", network " + shape_text(target) + ")");
      return;
    }
    at::NoGradGuard no_grad;
    target.copy_(value);
    report.loaded.push_back(prefix + name);
  };
  for (auto& p : module.named_parameters(/*recurse=*/false)) load_tensor(p.key(), p.value(), false);
  for (auto& b : module.named_buffers(/*recurse=*/false)) load_tensor(b.key(), b.value(), true);
  for (auto& child : module.named_children()) {
    own.push_back(child.key());
    torch::serialize::InputArchive sub;
    if (has_key(child.key()) && archive.try_read(child.key(), sub)) {
      match(*child.value(), sub, prefix + child.key() + ".", report, shape_errors);
    } else {
      for (auto& p : child.value()->named_parameters()) report.missing.push_back(prefix + child.key() + "." + p.key());
    }
  }
  for (const auto& k : keys)
    if (std::find(own.begin(), own.end(), k) == own.end()) report.unexpected.push_back(prefix + k);
}

}  // namespace

PretrainedReport load_pretrained_archive(const std::string& path, Network& network);

namespace {

// A pretrained file whose shapes do not fit, or whose names match nothing.
void refuse_unusable(const std::string& where, const PretrainedReport& report,
                     const std::vector<std::string>& shape_errors, const std::string& what_matches,
                     const std::string& shape_hint, const std::string& name_hint) {
  if (!shape_errors.empty())
    throw ConfigError(where + ": parameter shapes do not fit the network: " + join(shape_errors),
                      "expected the same shapes as the network's parameters", shape_hint);
  if (report.loaded.empty())
    throw ConfigError(where + ": no " + what_matches + " matches the network",
                      "expected names like " +
                          (report.missing.empty() ? std::string("(none)") : report.missing.front()) + ", got " +
                          (report.unexpected.empty() ? std::string("nothing") : join(report.unexpected)),
                      name_hint);
}

// A state_dict from Python: a dict of name -> tensor in torch.save's format.
std::optional<std::map<std::string, at::Tensor>> python_state_dict(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const c10::Error&) {
    return std::nullopt;
  }
  if (!value.isGenericDict()) return std::nullopt;
  std::map<std::string, at::Tensor> out;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor()) return std::nullopt;
    out[item.key().toStringRef()] = item.value().toTensor();
  }
  return out;
}

}  // namespace

PretrainedReport load_pretrained(const std::string& path, Network& network,
                                 const std::vector<std::pair<std::string, std::string>>& rename) {
  const std::string where_file = "network.pretrained: " + path;
  if (fs::is_regular_file(path)) {
    if (auto state = python_state_dict(path)) {
      PretrainedReport report;
      std::map<std::string, at::Tensor> renamed;
      for (auto& [key, tensor] : *state) {
        std::string name = key;
        for (const auto& [from, to] : rename)
          if (name.rfind(from, 0) == 0) {
            name = to + name.substr(from.size());
            break;
          }
        renamed[name] = tensor;
      }
      std::vector<std::string> shape_errors;
      std::map<std::string, bool> used;
      auto load = [&](const std::string& name, at::Tensor target) {
        auto it = renamed.find(name);
        if (it == renamed.end()) return report.missing.push_back(name);
        used[name] = true;
        if (it->second.sizes() != target.sizes())
          return shape_errors.push_back(name + " (file " + shape_text(it->second) + ", network " + shape_text(target) +
                                        ")");
        at::NoGradGuard no_grad;
        target.copy_(it->second);
        report.loaded.push_back(name);
      };
      for (auto& p : network.named_parameters()) load(p.key(), p.value());
      for (auto& b : network.named_buffers()) load(b.key(), b.value());
      for (const auto& [name, tensor] : renamed)
        if (!used.count(name)) report.unexpected.push_back(name);
      refuse_unusable(
          where_file, report, shape_errors, "key of this state_dict",
          "check network.pretrained_rename, or the network's options",
          "map the file's key prefixes with network.pretrained_rename: {\"FILE_PREFIX.\": \"NETWORK_PREFIX.\"}");
      return report;
    }
  }
  return load_pretrained_archive(path, network);
}

PretrainedReport load_pretrained_archive(const std::string& path, Network& network) {
  const std::string where = "network.pretrained: " + path;
  if (!fs::is_regular_file(path))
    throw ConfigError(where + ": file does not exist", "expected a trainyard checkpoint or a torch::save'd module",
                      "check the path (relative to the working directory)");
  PretrainedReport report;
  std::vector<std::string> shape_errors;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path, c10::Device(c10::DeviceType::CPU));  // copied into the network's tensors below
    torch::serialize::InputArchive net;
    auto keys = archive.keys();
    if (std::find(keys.begin(), keys.end(), "format") != keys.end() && archive.try_read("network", net))
      match(network, net, "", report, shape_errors);
    else
      match(network, archive, "", report, shape_errors);
  } catch (const c10::Error& e) {
    throw ConfigError(where + ": cannot read: " + e.what_without_backtrace(),
                      "expected a trainyard checkpoint or a torch::save'd module", "");
  }
  refuse_unusable(where, report, shape_errors, "parameter name",
                  "use a checkpoint of the same network with the same options", "use a checkpoint of the same network");
  return report;
}

}  // namespace trainyard::host
