#pragma once
// A safetensors file (Hugging Face's format, the one the transformers,
// diffusers and timm ecosystems load weights from): an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the tensors' bytes, little-endian, in C order. Written from the
// format's specification (github.com/huggingface/safetensors, "Format"); no
// C++ library for it is packaged for Debian.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace trainyard::host {

/// The file's bytes for `tensors` (name, tensor), in that order, with
/// `metadata` as the header's "__metadata__" (string to string). Throws Error
/// for a dtype safetensors has no name for.
std::string safetensors_file(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                             const std::map<std::string, std::string>& metadata);

}  // namespace trainyard::host
