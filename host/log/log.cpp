#include "log/log.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <stdexcept>

namespace trainyard::host {
namespace {

// Info and debug to stdout, warnings and errors to stderr, each flushed at
// once (the launcher forwards workers' lines as they come), filtered by the
// level and the rank.
class ConsoleSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void set_console_level(LogLevel level) {
    std::lock_guard<std::mutex> lock(mutex_);
    level_ = level;
  }
  void set_rank(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    rank_ = rank;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const bool loud = msg.level >= spdlog::level::warn;
    const LogLevel level = msg.level >= spdlog::level::err    ? LogLevel::error
                           : msg.level >= spdlog::level::warn ? LogLevel::warning
                           : msg.level >= spdlog::level::info ? LogLevel::info
                                                              : LogLevel::debug;
    if (static_cast<int>(level) > static_cast<int>(level_)) return;
    if (rank_ != 0 && !loud) return;
    FILE* to = loud ? stderr : stdout;
    std::fwrite(msg.payload.data(), 1, msg.payload.size(), to);
    std::fputc('\n', to);
    std::fflush(to);
  }
  void flush_() override {
    std::fflush(stdout);
    std::fflush(stderr);
  }

 private:
  LogLevel level_ = LogLevel::info;
  int rank_ = 0;
};

struct Log {
  std::shared_ptr<ConsoleSink> console = std::make_shared<ConsoleSink>();
  // What came before the file: replayed into it when it is named.
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> backlog =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(2000);
  std::shared_ptr<spdlog::logger> logger;
  bool file = false;
  Log() {
    logger = std::make_shared<spdlog::logger>("trainyard", spdlog::sinks_init_list{console, backlog});
    logger->set_level(spdlog::level::debug);
    backlog->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
    console->set_pattern("%v");
  }
};

Log& the_log() {
  static Log log;
  return log;
}

}  // namespace

std::optional<LogLevel> parse_log_level(const std::string& text) {
  if (text == "error") return LogLevel::error;
  if (text == "warning" || text == "warn") return LogLevel::warning;
  if (text == "info") return LogLevel::info;
  if (text == "debug") return LogLevel::debug;
  return std::nullopt;
}

void set_log_level(LogLevel level) { the_log().console->set_console_level(level); }

void set_log_rank(int rank, int world_size) { the_log().console->set_rank(world_size > 1 ? rank : 0); }

void log_to_file(const std::string& path) {
  Log& log = the_log();
  if (log.file) return;
  // The sink opens by name: a link or special file planted there is refused
  // first (trainyard never writes through links in a run directory).
  if (struct stat st{}; ::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error(
        path + ": " + (S_ISLNK(st.st_mode) ? "a symbolic link" : "not a regular file") +
        " where the run's log goes; expected a regular file that trainyard creates, or none; remove it");
  auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
  file->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
  {
    // Earlier lines first, already formatted with their own time.
    std::FILE* out = std::fopen(path.c_str(), "a");
    if (out) {
      for (const auto& line : log.backlog->last_formatted()) std::fputs(line.c_str(), out);
      std::fclose(out);
    }
  }
  auto& sinks = log.logger->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), log.backlog), sinks.end());
  sinks.push_back(file);
  log.logger->flush_on(spdlog::level::debug);
  log.file = true;
}

void log_error(const std::string& message) { the_log().logger->error(message); }
void log_warning(const std::string& message) { the_log().logger->warn(message); }
void log_info(const std::string& message) { the_log().logger->info(message); }
void log_debug(const std::string& message) { the_log().logger->debug(message); }

InfoLine::~InfoLine() {
  std::string text = text_.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  log_info(text);
}

}  // namespace trainyard::host
