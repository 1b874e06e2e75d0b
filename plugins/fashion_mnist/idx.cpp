#include "idx.h"

#include <zlib.h>

#include <filesystem>

#include <trainyard/error.h>

namespace fashion_mnist {
namespace {

// Reads exactly `size` bytes, or returns how many there were.
size_t read_fully(gzFile f, void* out, size_t size) {
  size_t done = 0;
  while (done < size) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(size - done, 1u << 30));
    int n = gzread(f, static_cast<char*>(out) + done, chunk);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace

IdxArray read_idx(const std::string& path, int rank) {
  using trainyard::ConfigError;
  if (!std::filesystem::is_regular_file(path))
    throw ConfigError(path + ": file does not exist", "expected an idx file (.gz or plain)",
                      "install the dataset-fashion-mnist package or set the directory option");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw ConfigError(path + ": cannot open", "expected a readable file", "check its permissions");
  struct Closer {
    gzFile f;
    ~Closer() { gzclose(f); }
  } closer{f};

  unsigned char header[4];
  if (read_fully(f, header, 4) != 4 || header[0] != 0 || header[1] != 0)
    throw ConfigError(path + ": not an idx file", "expected the magic bytes 00 00 08 NN", "check the file");
  if (header[2] != 0x08 || header[3] != rank)
    throw ConfigError(path + ": unexpected idx type",
                      "expected unsigned bytes with " + std::to_string(rank) + " dimensions, got type " +
                          std::to_string(header[2]) + " with " + std::to_string(header[3]),
                      "images need 3 dimensions, labels 1");
  IdxArray array;
  size_t total = 1;
  for (int i = 0; i < rank; ++i) {
    unsigned char b[4];
    if (read_fully(f, b, 4) != 4) throw ConfigError(path + ": truncated header", "expected dimension sizes", "");
    int64_t d = (int64_t(b[0]) << 24) | (int64_t(b[1]) << 16) | (int64_t(b[2]) << 8) | int64_t(b[3]);
    array.dims.push_back(d);
    total *= static_cast<size_t>(d);
  }
  array.data.resize(total);
  size_t got = read_fully(f, array.data.data(), total);
  if (got != total)
    throw ConfigError(path + ": truncated", "expected " + std::to_string(total) + " data bytes, got " + std::to_string(got),
                      "the file is damaged; reinstall the dataset");
  return array;
}

}  // namespace fashion_mnist
