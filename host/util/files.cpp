#include "util/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "trainyard/error.h"

namespace fs = std::filesystem;

namespace trainyard::host {

void sync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open to sync: " + std::strerror(errno));
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  if (rc != 0) throw Error(path + ": fsync failed: " + std::strerror(saved));
}

void replace_file_atomic(const std::string& path, const std::function<void(const std::string&)>& write) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  try {
    write(tmp);
    sync_path(tmp);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    std::remove(tmp.c_str());
    throw Error(path + ": cannot rename the temporary file into place: " + std::strerror(saved));
  }
  std::string folder = std::filesystem::path(path).parent_path().string();
  sync_path(folder.empty() ? "." : folder);
}

void write_file_atomic(const std::string& path, const std::string& content) {
  replace_file_atomic(path, [&](const std::string& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) throw Error(tmp + ": cannot write: " + std::strerror(errno));
  });
}

void check_output_folder(const std::string& path, const std::string& origin) {
  const fs::path wanted = fs::absolute(path).lexically_normal();
  fs::path existing = wanted;
  std::error_code ec;
  while (!fs::exists(existing, ec) && existing.has_parent_path() && existing != existing.parent_path())
    existing = existing.parent_path();
  if (!fs::is_directory(existing, ec))
    throw ConfigError(origin + ": " + existing.string() + " is a file",
                      "expected a folder (or a path where one can be created), found a file", "choose another folder");
  if (::access(existing.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    throw ConfigError(origin + ": cannot write in " + existing.string() + " (" + std::strerror(err) + ")",
                      "expected a folder this user can write in", "choose another folder or fix its permissions");
  }
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void append_line(const std::string& path, const std::string& line) {
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) throw Error(path + ": cannot open for appending: " + std::strerror(errno));
  std::fputs(line.c_str(), f);
  std::fputc('\n', f);
  if (std::fclose(f) != 0) throw Error(path + ": cannot append: " + std::strerror(errno));
}

}  // namespace trainyard::host
