#include "formats/npy.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "trainyard/error.h"
#include "util/files.h"

namespace trainyard::host {
namespace {

constexpr char kMagic[] = "\x93NUMPY";  // then the version bytes 1, 0 and a little-endian uint16 header length

const char* descr_of(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "<f4";
    case at::kDouble:
      return "<f8";
    case at::kLong:
      return "<i8";
    default:
      return nullptr;
  }
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw ConfigError(path + ": " + what,
                    "expected a .npy file of float32, float64 or int64 values in C order, as "
                    "trainyard embed and numpy.save write",
                    "");
}

// The value of 'key' in the header's dict literal, up to the next ',' or '}' outside parentheses.
std::string header_value(const std::string& header, const std::string& key, const std::string& path) {
  const size_t at = header.find("'" + key + "':");
  if (at == std::string::npos) bad(path, "its header has no '" + key + "'");
  size_t begin = at + key.size() + 3, end = begin, depth = 0;
  while (end < header.size() && (depth > 0 || (header[end] != ',' && header[end] != '}'))) {
    if (header[end] == '(') ++depth;
    if (header[end] == ')') --depth;
    ++end;
  }
  std::string v = header.substr(begin, end - begin);
  v.erase(0, v.find_first_not_of(' '));
  v.erase(v.find_last_not_of(' ') + 1);
  return v;
}

}  // namespace

void write_npy(const std::string& path, const at::Tensor& tensor) {
  const char* descr = descr_of(tensor.scalar_type());
  if (!descr)
    throw Error("write_npy " + path + ": " + c10::toString(tensor.scalar_type()) +
                " values; expected float32, float64 or int64");
  const at::Tensor t = tensor.cpu().contiguous();
  std::string shape = "(";
  for (int64_t d = 0; d < t.dim(); ++d)
    shape += std::to_string(t.size(d)) + (t.dim() == 1 || d + 1 < t.dim() ? "," : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // The preamble and header take a multiple of 64 bytes, the header ending in '\n'.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string bytes(kMagic, 6);
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>((header.size() >> 8) & 0xff);
  bytes += header;
  bytes.append(static_cast<const char*>(t.const_data_ptr()), static_cast<size_t>(t.nbytes()));
  write_file_atomic(path, bytes);
}

at::Tensor read_npy(const std::string& path) {
  if (!std::ifstream(path, std::ios::binary)) throw ConfigError(path + ": cannot be read", "expected a .npy file", "");
  const std::string bytes = read_whole_file(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, std::string(kMagic, 6)) != 0)
    bad(path, "not a .npy file (no \\x93NUMPY)");
  if (bytes[6] != 1) bad(path, ".npy format version " + std::to_string(int(bytes[6])));
  const size_t header_size = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  if (bytes.size() < 10 + header_size) bad(path, "its header is cut short");
  const std::string header = bytes.substr(10, header_size);
  const std::string descr = header_value(header, "descr", path);
  at::ScalarType type;
  if (descr == "'<f4'")
    type = at::kFloat;
  else if (descr == "'<f8'")
    type = at::kDouble;
  else if (descr == "'<i8'")
    type = at::kLong;
  else
    bad(path, "values of type " + descr);
  if (header_value(header, "fortran_order", path) != "False") bad(path, "Fortran order");
  std::string shape = header_value(header, "shape", path);
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') bad(path, "shape " + shape);
  std::vector<int64_t> sizes;
  std::stringstream dims(shape.substr(1, shape.size() - 2));
  for (std::string d; std::getline(dims, d, ',');) {
    d.erase(0, d.find_first_not_of(' '));
    if (d.empty()) continue;
    try {
      size_t used = 0;
      sizes.push_back(std::stoll(d, &used));
      if (used != d.size() || sizes.back() < 0) throw std::invalid_argument(d);
    } catch (const std::exception&) {
      bad(path, "shape " + shape);
    }
  }
  // The header's size is checked against the file's before anything is
  // allocated: a 200-byte header may declare 64 GB.
  const size_t data = 10 + header_size;
  const uint64_t held = bytes.size() - data;
  uint64_t declared = c10::elementSize(type);
  bool overflow = false;
  for (int64_t d : sizes) overflow |= __builtin_mul_overflow(declared, static_cast<uint64_t>(d), &declared);
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) declared = 0, overflow = false;
  if (overflow || declared != held)
    bad(path, std::to_string(held) + " bytes of values for shape " + shape + " (the header declares " +
                  (overflow ? "more than 2^64" : std::to_string(declared)) + " bytes)");
  at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(type));
  std::memcpy(t.mutable_data_ptr(), bytes.data() + data, static_cast<size_t>(t.nbytes()));
  return t;
}

}  // namespace trainyard::host
