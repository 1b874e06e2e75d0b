#pragma once
// SHA-256 (FIPS 180-4), for the plugin library hashes a run records.
#include <string>

namespace trainyard::host {

/// Lowercase hex digest of `data`.
std::string sha256_hex(const std::string& data);
/// Lowercase hex digest of a file's bytes; throws trainyard::Error if unreadable.
std::string sha256_file(const std::string& path);

}  // namespace trainyard::host
