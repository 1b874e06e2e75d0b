#pragma once
// A PyTorch state_dict file, as Python's torch.save writes one: a zip
// archive holding data.pkl (a pickled dict of name -> tensor whose storages
// are persistent references), one data/<key> record per storage, byteorder.
// torch.load(path, weights_only=True) reads it: only dict, the tensor
// rebuild function and storage types appear in the pickle.
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace trainyard::host {

/// The file's bytes for `tensors` (name, tensor), in that order.
std::string pytorch_state_dict(const std::vector<std::pair<std::string, at::Tensor>>& tensors);

}  // namespace trainyard::host
