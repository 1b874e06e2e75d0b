#pragma once
// The host's leveled log (spdlog): error, warning, info, debug.
//
// Console: info and debug on stdout, warnings and errors on stderr, as they
// are (no prefix is added: messages say "trainyard: ..." or "error: ...").
// Rank 0 shows the chosen level and above; the other ranks of a distributed
// run show warnings and errors only (rank 0 speaks for all).
// File: once log_to_file() names one (RUN_DIR/trainyard.log, or
// trainyard-rankN.log), every message of every level, with time and level;
// what was logged before the file was named is written into it first.
// Its own layer, below util: spdlog is compiled against Debian's fmt, which
// LibTorch's bundled fmt headers would shadow in any target that sees them.
#include <optional>
#include <sstream>
#include <string>

namespace trainyard::host {

enum class LogLevel { error, warning, info, debug };

/// "error", "warning", "info", "debug"; nothing for another word.
std::optional<LogLevel> parse_log_level(const std::string& text);
/// The console's level (--log-level, TRAINYARD_LOG_LEVEL); info by default.
void set_log_level(LogLevel level);
/// This process's rank in a distributed run (others than 0 keep quiet).
void set_log_rank(int rank, int world_size);
void log_to_file(const std::string& path);

void log_error(const std::string& message);
void log_warning(const std::string& message);
void log_info(const std::string& message);
void log_debug(const std::string& message);

/// `InfoLine() << "trainyard: " << n << " epochs\n";` logs the text at info
/// level when the statement ends (a trailing newline is dropped).
class InfoLine {
 public:
  InfoLine() = default;
  InfoLine(const InfoLine&) = delete;
  ~InfoLine();
  template <class T>
  InfoLine& operator<<(const T& value) {
    text_ << value;
    return *this;
  }

 private:
  std::ostringstream text_;
};

}  // namespace trainyard::host
