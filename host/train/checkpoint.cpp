#include "train/checkpoint.h"

#include <ATen/detail/CUDAHooksInterface.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/utils.h>

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

namespace {

// The archive of a checkpoint as LibTorch's save() functions build it: its
// tensors are the training state's own (no copy).
torch::serialize::OutputArchive checkpoint_archive(Network& network, torch::optim::Optimizer& optimizer,
                                                   const CheckpointState& state,
                                                   const std::vector<const CheckpointPart*>& parts) {
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
  return archive;
}

// OutputArchive keeps the TorchScript module it builds private, and nothing
// public copies an archive's tensors. An explicit instantiation may name a
// private member ([temp.spec.general]/6): this one hands out a pointer to
// OutputArchive::module_, through which snapshot_checkpoint() replaces the
// archive's tensors (the training state's own) with copies.
using ArchiveModule = torch::jit::Module torch::serialize::OutputArchive::*;
ArchiveModule archive_module_member();
template <ArchiveModule Member>
struct ArchiveModuleAccess {
  friend ArchiveModule archive_module_member() { return Member; }
};
template struct ArchiveModuleAccess<&torch::serialize::OutputArchive::module_>;

// Copies of the archive's tensors on the host: one storage copy for each
// storage (shared storages stay shared, views keep their offsets and
// strides, so the file holds what save_checkpoint() writes), a GPU's
// storage into pinned memory without waiting (the caller synchronises).
class HostCopies {
 public:
  at::Tensor copy(const at::Tensor& t) {
    if (!t.defined()) return t;
    if (t.layout() != at::kStrided || !t.has_storage()) return t.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
    const c10::Storage& storage = t.storage();
    auto [it, fresh] = storages_.try_emplace(storage.unsafeGetStorageImpl());
    if (fresh) it->second = copy_storage(storage, t.device());
    at::Tensor out = at::empty({0}, t.options().device(at::kCPU).pinned_memory(false));
    out.set_(it->second, t.storage_offset(), t.sizes(), t.strides());
    if (t.requires_grad()) out.set_requires_grad(true);
    return out;
  }

  c10::IValue copy(const c10::IValue& v) {
    if (v.isTensor()) return copy(v.toTensor());
    if (v.isObject()) {  // a nested archive: its slots in place
      const auto& object = v.toObject();
      for (size_t i = 0; i < object->slots().size(); ++i) object->setSlot(i, copy(object->getSlot(i)));
      return v;
    }
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(copy(t));
      return out;
    }
    if (v.isList()) {
      auto list = v.toList();
      c10::impl::GenericList out(list.elementType());
      for (const c10::IValue& e : list) out.push_back(copy(e));
      return out;
    }
    if (v.isGenericDict()) {
      auto dict = v.toGenericDict();
      c10::impl::GenericDict out(dict.keyType(), dict.valueType());
      for (const auto& e : dict) out.insert(e.key(), copy(e.value()));
      return out;
    }
    if (v.isTuple()) {
      std::vector<c10::IValue> out;
      for (const c10::IValue& e : v.toTupleRef().elements()) out.push_back(copy(e));
      return c10::ivalue::Tuple::create(std::move(out));
    }
    return v;  // numbers, strings, booleans: values already
  }

  /// Waits for the copies from each GPU (one stream synchronisation each).
  void synchronize() {
    for (const c10::Device& device : devices_) {
      c10::impl::VirtualGuardImpl guard(device.type());
      guard.getStream(device).synchronize();
    }
  }

 private:
  c10::Storage copy_storage(const c10::Storage& storage, const c10::Device& device) {
    const auto bytes = static_cast<int64_t>(storage.nbytes());
    at::Tensor raw = at::empty({0}, at::TensorOptions().dtype(at::kByte).device(device));
    raw.set_(storage, 0, {bytes}, {1});
    if (device.is_cpu()) return raw.clone().storage();
    if (std::find(devices_.begin(), devices_.end(), device) == devices_.end()) devices_.push_back(device);
    at::Tensor host = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
    host.copy_(raw, /*non_blocking=*/true);
    return host.storage();
  }

  std::map<const c10::StorageImpl*, c10::Storage> storages_;
  std::vector<c10::Device> devices_;
};

}  // namespace

namespace {
// The checkpoint as written, its archive holding the training state's own tensors.
CheckpointSnapshot live_checkpoint(Network& network, torch::optim::Optimizer& optimizer, const CheckpointState& state,
                                   const std::vector<const CheckpointPart*>& parts) {
  CheckpointSnapshot checkpoint;
  checkpoint.archive = checkpoint_archive(network, optimizer, state, parts);
  checkpoint.state = manifest_state(state);
  return checkpoint;
}
}  // namespace

void save_checkpoint(const std::string& path, Network& network, torch::optim::Optimizer& optimizer,
                     const CheckpointState& state, const std::vector<const CheckpointPart*>& parts) {
  CheckpointSnapshot live = live_checkpoint(network, optimizer, state, parts);
  write_checkpoint(path, live);
}

CheckpointState manifest_state(const CheckpointState& state) {
  CheckpointState kept;
  kept.at = state.at;
  kept.config_hash = state.config_hash;
  kept.config = state.config;
  return kept;
}

CheckpointSnapshot snapshot_checkpoint(Network& network, torch::optim::Optimizer& optimizer,
                                       const CheckpointState& state, const std::vector<const CheckpointPart*>& parts) {
  CheckpointSnapshot snapshot = live_checkpoint(network, optimizer, state, parts);
  torch::NoGradGuard no_grad;
  HostCopies copies;
  copies.copy(c10::IValue((snapshot.archive.*archive_module_member())._ivalue()));
  copies.synchronize();
  return snapshot;
}

void write_checkpoint(const std::string& path, CheckpointSnapshot& snapshot) {
  const CheckpointState& state = snapshot.state;
  // The bytes are hashed as they are written; the manifest, written last,
  // makes the checkpoint a complete unit (one without it is not loaded).
  std::ostringstream bytes;
  snapshot.archive.save_to(bytes);
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
  if (auto it = m.find("config_sha256"); it != m.end() && it->is_string())
    record.config_sha256 = it->get<std::string>();
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
    throw Error(path + ": damaged: " + std::to_string(actual_size) + " bytes, the manifest says " +
                std::to_string(size));
  if (sha256_file(path) != expected) throw Error(path + ": damaged: its SHA-256 differs from the manifest's");
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
      throw Error("checkpoint format " + std::to_string(format) + ", this host reads " +
                  std::to_string(kFormatVersion));
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

}  // namespace trainyard::host
