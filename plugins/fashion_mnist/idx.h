#pragma once
// Reading the idx format (MNIST, Fashion-MNIST), gzip-compressed or not.
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace fashion_mnist {

struct IdxArray {
  std::vector<int64_t> dims;
  at::Tensor data;  ///< unsigned bytes (kByte), flat, row-major
};

/// Reads an idx file of unsigned bytes (type 0x08) with `rank` dimensions.
/// Throws trainyard::ConfigError naming the file for a missing, foreign or
/// truncated file.
IdxArray read_idx(const std::string& path, int rank);

}  // namespace fashion_mnist
