#pragma once
// Writing files so that a crash never leaves a half-written one under the final name.
#include <functional>
#include <string>
#include <vector>

namespace trainyard::host {

/// Writes `content` to PATH.tmp-PID, fsyncs it, renames it over `path` and
/// fsyncs the folder. Throws trainyard::Error naming the path on failure.
void write_file_atomic(const std::string& path, const std::string& content);
/// The same for a file some other code writes: `write(tmp_path)` fills the
/// temporary file, then it is synced and renamed into place.
void replace_file_atomic(const std::string& path, const std::function<void(const std::string&)>& write);
/// Refuses, with a ConfigError starting with `origin` ("--output-dir DIR"),
/// a folder to write into that is a file, lies under a file, or whose nearest
/// existing folder cannot be written (permissions, a read-only file system).
/// Creates nothing: a refused run leaves no trace.
void check_output_folder(const std::string& path, const std::string& origin);
/// Refuses, with a ConfigError starting with `origin` ("command line: --output
/// FILE"), an output file that is a folder (or ends in '/'), lies in a folder
/// that does not exist, is not a regular file (a device, FIFO, socket or
/// symbolic link: it is never replaced), or is write-protected; then checks its
/// folder as check_output_folder does. Creates nothing.
void check_output_file(const std::string& path, const std::string& origin);
/// A file's whole contents, bytes as they are (empty if it does not exist or
/// cannot be read: callers that must tell check first).
std::string read_whole_file(const std::string& path);
/// The lines of a text file (empty if it does not exist).
std::vector<std::string> read_lines(const std::string& path);
/// fsync of a file or folder by path.
void sync_path(const std::string& path);

/// A new folder written whole or not at all: filled as PATH.partial-PID
/// (dir()), synced and renamed to `path` by commit(); dropped uncommitted
/// (an error on the way), the partial folder is removed. `path` itself is the caller's
/// to check: it must not exist.
///
/// Example:
///   NewFolder out(request.output);
///   write_file_atomic(out.dir() + "/results.json", json);
///   out.commit();
class NewFolder {
 public:
  explicit NewFolder(std::string path);
  ~NewFolder();
  NewFolder(const NewFolder&) = delete;
  NewFolder& operator=(const NewFolder&) = delete;
  const std::string& dir() const { return partial_; }
  void commit();

 private:
  std::string path_, partial_;
  bool committed_ = false;
};
/// Appends one line and flushes it to the OS (not fsync'd: metrics may lose
/// the last lines in a power cut, never their order).
void append_line(const std::string& path, const std::string& line);

}  // namespace trainyard::host
