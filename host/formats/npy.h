#pragma once
// NumPy's .npy files (format version 1.0, as numpy.lib.format writes them):
// the arrays of an embedding catalog (`trainyard embed`), which
// numpy.load() reads as they are. Written here rather than through a
// library: no C++ .npy library is packaged for Debian, and the format is a
// 10-byte preamble, a Python-literal header and the raw values.
#include <string>

#include <ATen/core/Tensor.h>

namespace trainyard::host {

/// Writes a float32, float64 or int64 tensor (any shape, C order,
/// little-endian) atomically (util/files.h). Throws Error otherwise.
void write_npy(const std::string& path, const at::Tensor& tensor);

/// Reads what write_npy() writes (and NumPy writes for those dtypes, C order).
/// Throws ConfigError naming the file and what is wrong with it: not a .npy
/// file, another dtype or Fortran order, fewer bytes than its shape needs.
at::Tensor read_npy(const std::string& path);

}  // namespace trainyard::host
