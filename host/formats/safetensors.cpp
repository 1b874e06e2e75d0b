#include "formats/safetensors.h"

#include <ATen/ATen.h>

#include "trainyard/error.h"
#include "util/json.h"

namespace trainyard::host {
namespace {

const char* dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "F32";
    case at::kDouble:
      return "F64";
    case at::kHalf:
      return "F16";
    case at::kBFloat16:
      return "BF16";
    case at::kLong:
      return "I64";
    case at::kInt:
      return "I32";
    case at::kShort:
      return "I16";
    case at::kChar:
      return "I8";
    case at::kByte:
      return "U8";
    case at::kBool:
      return "BOOL";
    default:
      return nullptr;
  }
}

}  // namespace

std::string safetensors_file(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                             const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  size_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const char* dtype = dtype_name(tensor.scalar_type());
    if (!dtype)
      throw Error("safetensors: " + name + " holds " + c10::toString(tensor.scalar_type()) +
                  " values, which the format cannot name");
    const at::Tensor t = tensor.detach().cpu().contiguous();
    const size_t bytes = static_cast<size_t>(t.nbytes());
    header[name] = {{"dtype", dtype}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(t);
  }
  // The header is padded with spaces to a multiple of 8 bytes, so the data starts aligned.
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += text;
  out.reserve(out.size() + offset);
  for (const auto& t : data) out.append(static_cast<const char*>(t.const_data_ptr()), static_cast<size_t>(t.nbytes()));
  return out;
}

}  // namespace trainyard::host
