#include "formats/state_dict.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/pickler_helper.h>

namespace trainyard::host {

std::string pytorch_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  // Each tensor on the CPU in a storage of its own (no views of a larger one).
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) dict.insert(name, tensor.detach().cpu().clone().contiguous());
  std::string pickle;
  int64_t next_key = 0;
  // As torch.save: persistent storage ids; no type tags on the dict (jit's
  // restore_type_tag is not among what weights_only loading allows).
  torch::jit::Pickler pickler([&](const char* data, size_t size) { pickle.append(data, size); }, nullptr, nullptr,
                              nullptr, [&](const at::Tensor&) { return std::to_string(next_key++); },
                              /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(dict));
  pickler.stop();
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    out.append(static_cast<const char*>(data), size);
    return size;
  });
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  writer.writeRecord("byteorder", "little", 6);
  const std::vector<at::Tensor>& storages = pickler.tensorData();
  for (size_t k = 0; k < storages.size(); ++k) {
    const torch::jit::WriteableTensorData data = torch::jit::getWriteableTensorData(storages[k]);
    writer.writeRecord("data/" + std::to_string(k), data.data(), data.sizeInBytes());
  }
  writer.writeEndOfFile();
  return out;
}

}  // namespace trainyard::host
