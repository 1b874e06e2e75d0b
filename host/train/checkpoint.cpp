#include "train/checkpoint.h"

#include <ATen/detail/CUDAHooksInterface.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize.h>
#include <torch/serialize/output-archive.h>

#include "trainyard/error.h"
#include "trainyard/network.h"
#include "util/files.h"
#include "util/json.h"
#include "util/sha256.h"
#include "util/shape.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace trainyard::host {
namespace {

// The device the run trains on: its GPU's generator is saved with the CPU's.
c10::Device network_device(Network& network) {
  for (const auto& p : network.parameters()) return p.device();
  for (const auto& b : network.buffers()) return b.device();
  return c10::Device(c10::DeviceType::CPU);
}

constexpr int64_t kFormatVersion = 1;
const std::regex kName(R"(ckpt-e(\d+)-i(\d+)\.pt)");

int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue v;
  archive.read(key, v);
  return v.toInt();
}

std::string shape_text(const at::Tensor& t) { return host::shape_text(t.sizes()); }

// Written since multi-stage runs; older checkpoints are of one-stage runs.
void read_stage_and_values(torch::serialize::InputArchive& archive, CheckpointState& state, const std::string& path) {
  c10::IValue v;
  if (archive.try_read("stage", v)) state.stage = v.toInt();
  if (archive.try_read("stage_first_iteration", v)) state.stage_first_iteration = v.toInt();
  if (archive.try_read("stage_first_epoch", v)) state.stage_first_epoch = v.toInt();
  // Meter values: absent in checkpoints written before they were recorded.
  c10::IValue names;
  at::Tensor numbers;
  if (archive.try_read("value_names", names) && archive.try_read("values", numbers)) {
    auto list = names.toListRef();
    numbers = numbers.cpu().contiguous();
    if (static_cast<int64_t>(list.size()) != numbers.numel())
      throw Error(path + ": cannot load checkpoint: value_names and values differ in length");
    for (size_t i = 0; i < list.size(); ++i) state.values[list[i].toStringRef()] = numbers.data_ptr<double>()[i];
  }
}

}  // namespace

std::string checkpoint_file_name(const LoopPosition& at) {
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-e%04lld-i%08lld.pt", static_cast<long long>(at.epoch),
                static_cast<long long>(at.iteration));
  return name;
}

void save_checkpoint(const std::string& path, Network& network, torch::optim::Optimizer& optimizer,
                     const CheckpointState& state, const std::vector<const CheckpointPart*>& parts) {
  torch::serialize::OutputArchive archive;
  archive.write("format", c10::IValue(kFormatVersion));
  archive.write("epoch", c10::IValue(state.at.epoch));
  archive.write("position", c10::IValue(state.at.position));
  archive.write("iteration", c10::IValue(state.at.iteration));
  torch::serialize::OutputArchive net, opt;
  network.save(net);
  optimizer.save(opt);
  archive.write("network", net);
  archive.write("optimizer", opt);
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    archive.write("rng_cpu", gen.get_state());
  }
  // The GPU's generator too (dropout on a GPU draws from it): a resume on the same device is exact.
  if (const auto device = network_device(network); device.is_cuda()) {
    auto gen = at::detail::getCUDAHooks().getDefaultGenerator(device.index());
    std::lock_guard<std::mutex> lock(gen.mutex());
    archive.write("rng_cuda", gen.get_state());
  }
  archive.write("loss_scale", c10::IValue(state.loss_scale));
  archive.write("loss_scale_finite_in_a_row", c10::IValue(state.loss_scale_finite_in_a_row));
  archive.write("loss_scale_skipped", c10::IValue(state.loss_scale_skipped));
  archive.write("stopping_best", c10::IValue(state.best));
  archive.write("stopping_has_best", c10::IValue(state.has_best));
  archive.write("stopping_bad_epochs", c10::IValue(state.epochs_without_improvement));
  archive.write("stage", c10::IValue(state.stage));
  archive.write("stage_first_iteration", c10::IValue(state.stage_first_iteration));
  archive.write("stage_first_epoch", c10::IValue(state.stage_first_epoch));
  {
    std::vector<std::string> names;
    std::vector<double> numbers;
    for (const auto& [k, v] : state.values) names.push_back(k), numbers.push_back(v);
    archive.write("value_names", c10::IValue(c10::List<std::string>(names)));
    archive.write("values", at::tensor(at::ArrayRef<double>(numbers.data(), numbers.size()), at::kDouble));
  }
  archive.write("train_meter_count", c10::IValue(static_cast<int64_t>(state.train_meters.size())));
  for (size_t i = 0; i < state.train_meters.size(); ++i) {
    auto acc = state.train_meters[i];
    archive.write("train_meter_" + std::to_string(i),
                  at::tensor(at::ArrayRef<double>(acc.data(), acc.size()), at::kDouble));
  }
  for (const CheckpointPart* part : parts) {
    torch::serialize::OutputArchive own;
    part->save_part(own);
    archive.write("part_" + part->checkpoint_key(), own);
  }
  // The bytes are hashed as they are written; the manifest, written last,
  // makes the checkpoint a complete unit (one without it is not loaded).
  std::ostringstream bytes;
  archive.save_to(bytes);
  const std::string data = bytes.str();
  write_file_atomic(path, data);
  // Test hook: a window between the checkpoint and its manifest, for the kill -9 tests.
  if (const char* pause = std::getenv("TRAINYARD_TEST_PAUSE_IN_CHECKPOINT_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(pause)));
  nlohmann::ordered_json manifest;
  manifest["file"] = fs::path(path).filename().string();
  manifest["size"] = data.size();
  manifest["sha256"] = sha256_hex(data);
  manifest["config_sha256"] = state.config_hash;
  manifest["epoch"] = state.at.epoch;
  manifest["iteration"] = state.at.iteration;
  manifest["format"] = kFormatVersion;
  if (!state.config.is_null()) manifest["config"] = state.config;
  write_file_atomic(manifest_path(path), json_text(manifest) + "\n");
}

std::string manifest_path(const std::string& checkpoint) { return checkpoint + ".manifest.json"; }

namespace {
nlohmann::ordered_json manifest_json(const std::string& path) {
  const std::string manifest = manifest_path(path);
  if (!fs::exists(manifest))
    throw Error(path + ": no manifest (" + fs::path(manifest).filename().string() +
                "): the checkpoint was not completely written");
  // Whatever the file holds (found by fuzz_manifest: a scalar where a map belongs threw past a reader).
  const nlohmann::ordered_json m = read_json_file(manifest);
  if (m.is_discarded()) throw Error(manifest + ": unreadable manifest: not JSON");
  if (!m.is_object()) throw Error(manifest + ": unreadable manifest: not a map");
  return m;
}
}  // namespace

ManifestRecord read_manifest(const std::string& path) {
  const nlohmann::ordered_json m = manifest_json(path);
  ManifestRecord record;
  if (auto it = m.find("config_sha256"); it != m.end() && it->is_string()) record.config_sha256 = it->get<std::string>();
  if (auto it = m.find("config"); it != m.end() && it->is_object()) record.config = *it;
  return record;
}

void verify_checkpoint(const std::string& path) {
  int64_t size = -1;
  std::string expected;
  const nlohmann::ordered_json m = manifest_json(path);
  if (auto it = m.find("size"); it != m.end() && it->is_number_integer()) size = it->get<int64_t>();
  if (auto it = m.find("sha256"); it != m.end() && it->is_string()) expected = it->get<std::string>();
  std::error_code ec;
  const auto actual_size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) throw Error(path + ": cannot read: " + ec.message());
  if (actual_size != size)
    throw Error(path + ": damaged: " + std::to_string(actual_size) + " bytes, the manifest says " + std::to_string(size));
  if (sha256_file(path) != expected) throw Error(path + ": damaged: its SHA-256 differs from the manifest's");
}

std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  if (!fs::is_directory(dir)) return removed;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const bool temporary = name.find(".tmp-") != std::string::npos;
    const std::string suffix = ".manifest.json";
    const bool orphan = name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
                        !fs::exists(entry.path().parent_path() / name.substr(0, name.size() - suffix.size()));
    if (temporary || orphan) {
      std::error_code ec;
      fs::remove(entry.path(), ec);
      if (!ec) removed.push_back(name);
    }
  }
  return removed;
}

CheckpointState load_checkpoint(const std::string& path, Network& network, torch::optim::Optimizer& optimizer,
                                Verify verify, const std::vector<CheckpointPart*>& parts) {
  CheckpointState state;
  if (verify == Verify::yes) verify_checkpoint(path);
  try {
    // Every tensor to the device this rank trains on: unmapped, LibTorch puts
    // each where it was saved from (rank 0's GPU), and Module::load would move
    // the parameters there (InputArchive::read's set_data across devices).
    torch::serialize::InputArchive archive;
    archive.load_from(path, network_device(network));
    int64_t format = read_int(archive, "format");
    if (format != kFormatVersion)
      throw Error("checkpoint format " + std::to_string(format) + ", this host reads " + std::to_string(kFormatVersion));
    state.at.epoch = read_int(archive, "epoch");
    state.at.position = read_int(archive, "position");
    state.at.iteration = read_int(archive, "iteration");
    torch::serialize::InputArchive net, opt;
    archive.read("network", net);
    archive.read("optimizer", opt);
    // Module::load would silently take the file's shapes: compare first.
    std::map<std::string, std::vector<int64_t>> shapes;
    for (const auto& p : network.named_parameters()) shapes[p.key()] = p.value().sizes().vec();
    for (const auto& b : network.named_buffers()) shapes[b.key()] = b.value().sizes().vec();
    network.load(net);
    std::vector<std::string> changed;
    for (const auto& p : network.named_parameters())
      if (shapes[p.key()] != p.value().sizes().vec()) changed.push_back(p.key() + " " + shape_text(p.value()));
    for (const auto& b : network.named_buffers())
      if (shapes[b.key()] != b.value().sizes().vec()) changed.push_back(b.key() + " " + shape_text(b.value()));
    if (!changed.empty())
      throw Error(path + ": checkpoint does not fit the network (file has " + join(changed) +
                  "); the network's options changed since it was written");
    optimizer.load(opt);
    at::Tensor rng;
    archive.read("rng_cpu", rng);
    rng = rng.cpu();  // generator states are CPU byte tensors, whatever the map above did
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(rng);
    }
    if (const auto device = network_device(network); device.is_cuda()) {
      at::Tensor cuda_rng;
      if (archive.try_read("rng_cuda", cuda_rng)) {
        cuda_rng = cuda_rng.cpu();
        auto gen = at::detail::getCUDAHooks().getDefaultGenerator(device.index());
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_state(cuda_rng);
      }
    }
    if (c10::IValue scale; archive.try_read("loss_scale", scale)) {
      state.loss_scale = scale.toDouble();
      state.loss_scale_finite_in_a_row = read_int(archive, "loss_scale_finite_in_a_row");
      state.loss_scale_skipped = read_int(archive, "loss_scale_skipped");
    }
    c10::IValue best, has_best;
    archive.read("stopping_best", best);
    archive.read("stopping_has_best", has_best);
    state.best = best.toDouble();
    state.has_best = has_best.toBool();
    state.epochs_without_improvement = read_int(archive, "stopping_bad_epochs");
    read_stage_and_values(archive, state, path);
    int64_t meters = read_int(archive, "train_meter_count");
    for (int64_t i = 0; i < meters; ++i) {
      at::Tensor t;
      archive.read("train_meter_" + std::to_string(i), t);
      t = t.cpu().contiguous();
      state.train_meters.emplace_back(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
    }
    for (CheckpointPart* part : parts) {
      torch::serialize::InputArchive own;
      if (!archive.try_read("part_" + part->checkpoint_key(), own)) continue;
      try {
        part->load_part(own);
      } catch (const Error& err) {
        throw Error(path + ": " + err.what());
      }
      state.parts_found.push_back(part->checkpoint_key());
    }
  } catch (const c10::Error& e) {
    throw Error(path + ": cannot load checkpoint: " + e.what_without_backtrace());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(path + ": cannot load checkpoint: " + e.what());
  }
  return state;
}

CheckpointState peek_checkpoint(const std::string& path) {
  // Not verified here: the resume loop verifies first (and then loads without
  // verifying again); hashing a large file twice is not free.
  CheckpointState state;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path, c10::Device(c10::DeviceType::CPU));  // no GPU memory for a look
    state.at.epoch = read_int(archive, "epoch");
    state.at.position = read_int(archive, "position");
    state.at.iteration = read_int(archive, "iteration");
    read_stage_and_values(archive, state, path);
  } catch (const c10::Error& e) {
    throw Error(path + ": cannot load checkpoint: " + e.what_without_backtrace());
  }
  return state;
}

std::optional<LoopPosition> position_of_name(const std::string& path) {
  std::smatch m;
  const std::string name = fs::path(path).filename().string();
  if (!std::regex_match(name, m, kName)) return std::nullopt;
  LoopPosition at;
  at.epoch = std::stoll(m[1]);
  at.iteration = std::stoll(m[2]);
  return at;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::string>> found;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw ConfigError(dir + ": not a folder", "expected the run's checkpoint folder, found a file",
                      "move the file away, or run with --fresh to start over");
  if (!fs::is_directory(dir)) return {};
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(name, m, kName))
      found.push_back({{std::stoll(m[2]), std::stoll(m[1])}, entry.path().string()});
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

void prune_checkpoints(const std::string& dir, int64_t keep) {
  if (keep <= 0) return;
  auto files = list_checkpoints(dir);
  // Oldest first; the newest `keep` stay (the one just written among them), and
  // best.pt is not a ckpt-* file: rotation never touches it.
  for (size_t i = 0; i + static_cast<size_t>(keep) < files.size(); ++i) {
    fs::remove(manifest_path(files[i]));
    fs::remove(files[i]);
  }
}

namespace {

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
                      "expected names like " + (report.missing.empty() ? std::string("(none)") : report.missing.front()) +
                          ", got " + (report.unexpected.empty() ? std::string("nothing") : join(report.unexpected)),
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
          return shape_errors.push_back(name + " (file " + shape_text(it->second) + ", network " + shape_text(target) + ")");
        at::NoGradGuard no_grad;
        target.copy_(it->second);
        report.loaded.push_back(name);
      };
      for (auto& p : network.named_parameters()) load(p.key(), p.value());
      for (auto& b : network.named_buffers()) load(b.key(), b.value());
      for (const auto& [name, tensor] : renamed)
        if (!used.count(name)) report.unexpected.push_back(name);
      refuse_unusable(where_file, report, shape_errors, "key of this state_dict",
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
  refuse_unusable(where, report, shape_errors, "parameter name", "use a checkpoint of the same network with the same options",
                  "use a checkpoint of the same network");
  return report;
}

}  // namespace trainyard::host
