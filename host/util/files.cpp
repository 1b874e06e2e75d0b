#include "util/files.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

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

NewFolder::NewFolder(std::string path)
    : path_(std::move(path)), partial_(path_ + ".partial-" + std::to_string(::getpid())) {
  std::filesystem::remove_all(partial_);  // a crashed run's of the same pid
  std::filesystem::create_directories(partial_);
}

NewFolder::~NewFolder() {
  if (committed_) return;
  std::error_code ec;
  std::filesystem::remove_all(partial_, ec);
}

void NewFolder::commit() {
  sync_path(partial_);  // its entries on disk before the name appears
  std::filesystem::rename(partial_, path_);
  committed_ = true;
}

namespace {

// A new temporary file beside `path`, created here (O_EXCL: never an existing
// file, a planted link or a device; O_NOFOLLOW), with the umask's mode. Returns
// its name and open descriptor.
std::pair<std::string, int> create_temporary(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0;; ++attempt) {
    // PATH.tmp-PID, or PATH.tmp-PID-N when that is taken (a stale one, another thread's).
    const std::string tmp =
        path + ".tmp-" + std::to_string(::getpid()) + (attempt == 0 ? "" : "-" + std::to_string(++counter));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) return {tmp, fd};
    if (errno != EEXIST || attempt >= 100)
      throw Error(tmp + ": cannot create the temporary file: " + std::strerror(errno));
  }
}

}  // namespace

void replace_file_atomic(const std::string& path, const std::function<void(const std::string&)>& write) {
  const auto [tmp, fd] = create_temporary(path);
  ::close(fd);
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

namespace {
// Writes all of `text` to `fd` and closes it; on failure closes it too and
// throws "FAILURE: REASON".
void write_and_close(int fd, const std::string& text, const std::string& failure) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = n < 0 ? errno : EIO;
      ::close(fd);
      throw Error(failure + ": " + std::strerror(saved));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) throw Error(failure + ": " + std::strerror(errno));
}
}  // namespace

void write_file_atomic(const std::string& path, const std::string& content) {
  replace_file_atomic(path, [&](const std::string& tmp) {
    // The file create_temporary made, opened again without following a link.
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) throw Error(tmp + ": cannot open: " + std::strerror(errno));
    write_and_close(fd, content, tmp + ": cannot write");
  });
}

void check_output_file(const std::string& path, const std::string& origin) {
  const fs::path p(path);
  struct stat st {};
  const bool exists = ::lstat(path.c_str(), &st) == 0;
  const bool trailing_slash = !path.empty() && path.back() == '/';
  if ((exists && S_ISDIR(st.st_mode)) || trailing_slash)
    throw ConfigError(origin + ": is a folder", "expected the path of a file to write",
                      "name a file in it, e.g. " + (p / "model.pt").lexically_normal().string());
  const std::string folder = p.parent_path().empty() ? "." : p.parent_path().string();
  std::error_code ec;
  if (!fs::exists(folder, ec))
    throw ConfigError(origin + ": the folder " + folder + " does not exist", "expected a file in an existing folder",
                      "create the folder first (mkdir -p " + folder + ")");
  if (!fs::is_directory(folder, ec))
    throw ConfigError(origin + ": " + folder + " is not a folder", "expected a file in an existing folder", "");
  if (exists && !S_ISREG(st.st_mode)) {
    const char* kind = S_ISLNK(st.st_mode)    ? "a symbolic link"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    throw ConfigError(origin + ": is " + std::string(kind) + ", not a regular file",
                      "expected a new file or a regular file to replace", "choose another path");
  }
  if (exists && (st.st_mode & 0222) == 0)
    throw ConfigError(
        origin + ": the file is write-protected (mode " +
            [&] {
              char mode[8];
              std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
              return std::string(mode);
            }() +
            ")",
        "expected a new file or one that may be replaced", "choose another path, or chmod u+w it first");
  if (exists) {
    // chattr +i (immutable) or +a (append only): the mode allows writing and
    // even root's rename over it fails (EPERM) after all the work is done.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    int flags = 0;
    if (fd >= 0) {
      if (::ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) flags = 0;  // a file system without attributes
      ::close(fd);
    }
    if (flags & (FS_IMMUTABLE_FL | FS_APPEND_FL))
      throw ConfigError(origin + ": the file is " + (flags & FS_IMMUTABLE_FL ? "immutable" : "append-only") +
                            " (chattr +" + (flags & FS_IMMUTABLE_FL ? "i" : "a") + ")",
                        "expected a new file or one that may be replaced",
                        "choose another path, or remove the attribute (chattr -i -a) first");
  }
  check_output_folder(folder, origin);
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
  // Never through a link planted where the file should be, never into a FIFO
  // or device (O_NONBLOCK: opening a FIFO would wait for a reader).
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ELOOP)
    throw ConfigError(path + ": a symbolic link where trainyard appends its records",
                      "expected a regular file that trainyard creates, or none",
                      "remove the link; trainyard never writes through links");
  if (fd < 0) throw Error(path + ": cannot open for appending: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw ConfigError(path + ": not a regular file where trainyard appends its records",
                      "expected a regular file that trainyard creates, or none", "remove it");
  }
  write_and_close(fd, line + "\n", path + ": cannot append");
}

}  // namespace trainyard::host
