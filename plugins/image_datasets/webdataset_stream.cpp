// webdataset with `pipe:COMMAND` urls: tar shards read as streams, in
// order, from a command's standard output (`pipe:curl -s URL`, an object
// store's CLI, `pipe:cat FILE`). Nothing is indexed and nothing is sought:
// the dataset is streamed (SDK 1.2), and the host asks each rank for its
// positions 0, 1, 2, ... of a pass.
//
// One reader thread per rank runs the commands one after another and turns
// each tar stream into samples; the host's decode threads decode them.
// Which samples a rank's positions are depends only on (seed, epoch, rank,
// world size, shard list):
//   - a cycle: the shards shuffled from (seed, epoch, cycle) (shuffle_shards),
//     rank r reading every world_size-th of them from r;
//   - a shuffle buffer of `shuffle_buffer` samples: each sample read replaces
//     a random one of the buffer, which is emitted; at the end of a cycle the
//     buffer is emptied in random order, so a cycle is a permutation of its
//     shards' samples;
//   - cycles follow one another for as long as the host asks (an epoch is
//     size() / world_size positions per rank).
// A pass that starts at position `first` (a resumed epoch) reads and drops
// the samples before it: the same positions, no decode.
//
// Memory: the shuffle buffer plus at most `read_ahead` samples read and not
// yet decoded, plus the batches being decoded; never the data set.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include <ATen/ATen.h>
#include <trainyard/error.h>
#include <trainyard/random.h>

#include "image_dataset.h"
#include "tar.h"

namespace image_datasets {
namespace {

using trainyard::BadRecord;
using trainyard::ConfigError;
using trainyard::DataError;

// A shell command whose standard output is read through a pipe. Killed on
// destruction if still running (a pass stopped early, or the dataset freed).
//
// The command runs under a guardian shell that leads the command's process
// group, runs `/bin/sh -c COMMAND` and waits for it (kGuardian). The kernel
// sends the guardian SIGTERM when the thread that started it ends
// (PR_SET_PDEATHSIG, kept across exec), with the process too (a SIGTERM
// during start-up, a crash, kill -9), and it then kills the group: a
// pipeline (`curl | tar`) never outlives the run. Its exit status is the
// command's (128 + N for a command killed by signal N). A shell, not a
// forked copy of trainyard: a copy would stay alive beside the run and make
// every page the run writes a copy-on-write fault.
class Command {
 public:
  /// $1 is the command. The trap ends the group, the guardian included; an
  /// asynchronous command's standard input is /dev/null (POSIX).
  static constexpr const char* kGuardian = "trap 'kill -KILL 0' TERM HUP; /bin/sh -c \"$1\" & wait $!";

  explicit Command(const std::string& command) : command_(command) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw ConfigError("pipe:" + command + ": cannot make a pipe: " + std::strerror(errno), "", "");
    const pid_t self = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) {
      ::close(fds[0]), ::close(fds[1]);
      throw ConfigError("pipe:" + command + ": cannot start: " + std::strerror(errno), "", "");
    }
    if (pid_ == 0) {  // the child: only async-signal-safe calls until exec
      ::dup2(fds[1], STDOUT_FILENO);
      ::setpgid(0, 0);  // its own group: a stop kills the whole pipeline (sh, curl, ...)
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);  // the reader thread's mask is not the command's
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(SIGTERM, &dfl, nullptr);  // a signal ignored on entry cannot be trapped by sh
      ::sigaction(SIGHUP, &dfl, nullptr);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != self) ::_exit(127);  // the run ended before the prctl
      ::execl("/bin/sh", "sh", "-c", kGuardian, "trainyard-pipe", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);
    ::close(fds[1]);
    fd_ = fds[0];
  }
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;
  ~Command() {
    if (fd_ >= 0) ::close(fd_);
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  /// Reads exactly n bytes; false at a clean end of the stream before any.
  /// Throws DataError when the stream ends inside them.
  bool read(char* out, size_t n, const std::string& what) {
    size_t got = 0;
    while (got < n) {
      const size_t r = read_some(out + got, n - got);
      if (r == 0) {
        if (got == 0) return false;
        throw DataError(name() + ": the stream ends inside " + what + " (" + std::to_string(got) + " of " +
                            std::to_string(n) + " bytes)",
                        "a complete tar on the command's standard output", "check the command and the shard");
      }
      got += r;
    }
    return true;
  }
  /// Reads n bytes into `out`, growing it with what arrives (1 MiB at a
  /// time), never by a size the stream only declares.
  void read_member(std::string& out, uint64_t n, const std::string& what) {
    out.clear();
    while (out.size() < n) {
      const size_t had = out.size();
      out.resize(had + static_cast<size_t>(std::min<uint64_t>(n - had, 1 << 20)));
      const size_t r = read_some(out.data() + had, out.size() - had);
      out.resize(had + r);
      if (r == 0)
        throw DataError(name() + ": the stream ends inside " + what + " (" + std::to_string(had) + " of " +
                            std::to_string(n) + " bytes)",
                        "a complete tar on the command's standard output", "check the command and the shard");
    }
  }
  void skip(uint64_t n, const std::string& what) {
    char scratch[1 << 16];
    const uint64_t all = n;
    while (n > 0) {
      const size_t r = read_some(scratch, static_cast<size_t>(std::min<uint64_t>(n, sizeof scratch)));
      if (r == 0)
        throw DataError(name() + ": the stream ends inside " + what + " (" + std::to_string(all - n) + " of " +
                            std::to_string(all) + " bytes)",
                        "a complete tar on the command's standard output", "check the command and the shard");
      n -= r;
    }
  }
  /// Waits for the command; throws ConfigError when it failed.
  void finish() {
    ::close(fd_);
    fd_ = -1;
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
    pid_ = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    const std::string how = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                              : "was killed by signal " + std::to_string(WTERMSIG(status));
    throw ConfigError(name() + " " + how, "a command that writes the shard to its standard output and exits 0",
                      "run the command by hand to see its error");
  }
  std::string name() const { return "shard pipe:" + command_; }
  pid_t pid() const { return pid_; }
  /// Reads to the end of the stream (the zero blocks after the archive's end):
  /// a command whose output is cut short dies of SIGPIPE.
  void drain() {
    char scratch[1 << 16];
    while (true) {
      const ssize_t r = ::read(fd_, scratch, sizeof scratch);
      if (r == 0 || (r < 0 && errno != EINTR)) return;
    }
  }

 private:
  // Up to n bytes as they come; 0 at the end of the stream.
  size_t read_some(char* out, size_t n) {
    while (true) {
      const ssize_t r = ::read(fd_, out, n);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno != EINTR) throw ConfigError(name() + ": read failed: " + std::strerror(errno), "", "");
    }
  }

  std::string command_;
  pid_t pid_ = -1;
  int fd_ = -1;
};

class StreamedShards : public ImageDataset {
 public:
  StreamedShards(const WebDatasetOptions& o, const trainyard::Context& context)
      : ImageDataset(checked_transforms(o)),
        seed_(context.seed),
        rank_(context.rank),
        world_(std::max(1, context.world_size)),
        size_(o.size),
        buffer_(static_cast<size_t>(o.shuffle_buffer)),
        read_ahead_(static_cast<size_t>(o.read_ahead)),
        shuffle_shards_(o.shuffle_shards),
        classes_(o.num_classes),
        mask_member_(o.target == "mask" ? o.mask_member : ""),
        start_timeout_(o.start_timeout) {
    const std::string pattern = o.urls;
    for (const auto& url : expand_braces(pattern)) {
      if (url.rfind("pipe:", 0) != 0)
        throw ConfigError("urls: '" + pattern + "': '" + url + "' is not a pipe: source",
                          "every name of a pipe: pattern to start with pipe:", "");
      commands_.push_back(url.substr(5));
    }
    if (size_ <= 0)
      throw ConfigError("urls: '" + pattern + "' streams shards, and size is not set",
                        "size: the samples of one epoch over all ranks (a stream does not say its length)",
                        "set size to the number of samples in the shards");
    if (classes_ <= 0 && mask_member_.empty())
      throw ConfigError("urls: '" + pattern + "' streams shards, and num_classes is not set",
                        "num_classes: the number of classes (a stream cannot be scanned for the largest label)", "");
    if (static_cast<int>(commands_.size()) < world_)
      throw ConfigError("urls: '" + pattern + "': " + std::to_string(commands_.size()) + " shards for " +
                            std::to_string(world_) + " ranks",
                        "at least one shard per rank (each rank reads its own shards)",
                        "split the data into more shards");
    try {
      // Reads position 0 of epoch 0, waiting at most start_timeout for it.
      start_deadline_ =
          std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                 std::chrono::duration<double>(start_timeout_));
      describe(classes_, {}, "urls '" + pattern + "'");
    } catch (...) {
      stop();  // no destructor runs for a constructor that throws: join the reader here
      throw;
    }
    start_deadline_.reset();
    stop();
  }
  ~StreamedShards() override { stop(); }

  int64_t size() const override { return size_; }
  bool streamed() const override { return true; }

  void begin_pass(int64_t epoch, int64_t first) const override {
    stop();
    std::lock_guard<std::mutex> lock(mutex_);
    window_.clear();
    taken_.clear();
    error_ = nullptr;
    stopping_ = false;
    started_ = true;
    reader_ = std::thread([this, epoch, first] { read_pass(epoch, first); });
  }

  trainyard::Example get_seeded(int64_t index, uint64_t seed) const override {
    // A sample is decoded once, or again when its batch is retried sample by
    // sample after a bad record: then its bytes wait in taken_ until here.
    struct Forget {
      const StreamedShards* self;
      int64_t index;
      ~Forget() {
        std::lock_guard<std::mutex> lock(self->mutex_);
        self->taken_.erase(index);
      }
    } forget{this, index};
    return ImageDataset::get_seeded(index, seed);
  }

  trainyard::Batch get_batch(const std::vector<int64_t>& indices, const std::vector<uint64_t>& seeds) const override {
    for (int64_t i : indices) take(i);  // in order: the reader never waits on a later batch
    if (decodes_on_gpu()) {
      trainyard::Batch batch = decode_batch_on_gpu(indices, seeds);  // a BadRecord keeps taken_ for the retry
      std::lock_guard<std::mutex> lock(mutex_);
      for (int64_t i : indices) taken_.erase(i);
      return batch;
    }
    std::vector<at::Tensor> inputs, targets;
    for (size_t k = 0; k < indices.size(); ++k) {
      trainyard::Example e = ImageDataset::get_seeded(indices[k], seeds[k]);  // a BadRecord keeps taken_ for the retry
      inputs.push_back(std::move(e.input));
      targets.push_back(std::move(e.target));
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int64_t i : indices) taken_.erase(i);
    }
    return {at::stack(inputs), at::stack(targets), indices};
  }

 protected:
  LoadedSample load(int64_t index) const override {
    take(index);
    std::lock_guard<std::mutex> lock(mutex_);
    const Record& r = taken_.at(index);
    LoadedSample out;
    out.inputs.push_back(SourceImage{r.bytes, {}, r.what, {}});
    if (mask_member_.empty())
      out.label = at::scalar_tensor(r.label, at::kLong);
    else
      out.targets.push_back(SourceImage{r.mask, {}, r.mask_what, {}});
    return out;
  }

 private:
  struct Record {
    std::string bytes;  ///< the image member
    std::string what;   ///< "shard pipe:CMD: KEY.jpg": named in errors
    int64_t label = 0;
    std::string mask, mask_what;  ///< target: mask: the mask member, and its name
  };

  // Moves position `index` from the reader's window to taken_, waiting for
  // the reader; a reader's error is thrown here, on the asking thread.
  void take(int64_t index) const {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!started_) {
      lock.unlock();
      begin_pass(0, 0);  // describe() at construction
      lock.lock();
    }
    if (taken_.count(index)) return;
    const auto ready = [&] { return window_.count(index) || error_ || stopping_; };
    if (!start_deadline_) {
      produced_.wait(lock, ready);
    } else if (!produced_.wait_until(lock, *start_deadline_, ready)) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", start_timeout_);
      throw DataError("shard pipe:" + command_ + ": no complete sample within start_timeout " + seconds +
                          " s of starting (" + std::to_string(command_bytes_) + " bytes read)",
                      "expected a command that writes a tar shard to its standard output",
                      "run the command by hand to see whether it stalls, or raise start_timeout");
    }
    if (auto it = window_.find(index); it != window_.end()) {
      taken_[index] = std::move(it->second);
      window_.erase(it);
      consumed_.notify_all();
      return;
    }
    if (error_) std::rethrow_exception(error_);
    throw ConfigError("position " + std::to_string(index) + " of a stopped pass", "a get after begin_pass", "");
  }

  void stop() const {
    std::thread reader;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      if (command_pid_ > 0) ::kill(-command_pid_, SIGKILL);  // unblocks a read from a stalled command
      reader = std::move(reader_);
    }
    produced_.notify_all();
    consumed_.notify_all();
    if (reader.joinable()) reader.join();
  }

  // The reader thread: cycles of this rank's shards through the shuffle
  // buffer, positions from 0; those before `first` are dropped.
  void read_pass(int64_t epoch, int64_t first) const {
    try {
      trainyard::SplitMix64 draws(trainyard::SplitMix64::mix(seed_ ^ trainyard::SplitMix64::mix(uint64_t(epoch) + 1)) ^
                                  uint64_t(rank_) * 0x51ed27ull);
      std::vector<Record> buffer;
      int64_t next = 0;
      auto emit = [&](Record r) {
        const int64_t position = next++;
        if (position < first) return true;
        std::unique_lock<std::mutex> lock(mutex_);
        consumed_.wait(lock, [&] { return stopping_ || window_.size() < read_ahead_; });
        if (stopping_) return false;
        window_.emplace(position, std::move(r));
        produced_.notify_all();
        return true;
      };
      for (uint64_t cycle = 0;; ++cycle) {
        std::vector<size_t> order(commands_.size());
        std::iota(order.begin(), order.end(), size_t{0});
        if (shuffle_shards_) {
          trainyard::SplitMix64 shards(
              trainyard::SplitMix64::mix(seed_ ^ trainyard::SplitMix64::mix(uint64_t(epoch) + 1)) ^
              trainyard::SplitMix64::mix(cycle + 0x7f4a));
          for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[shards.below(i + 1)]);
        }
        int64_t samples_in_cycle = 0;
        for (size_t k = static_cast<size_t>(rank_); k < order.size(); k += static_cast<size_t>(world_)) {
          bool go_on = true;
          read_shard(commands_[order[k]], [&](Record r) {
            ++samples_in_cycle;
            if (buffer_ == 0) return go_on = emit(std::move(r));
            if (buffer.size() < buffer_) {
              buffer.push_back(std::move(r));
              return true;
            }
            const size_t j = static_cast<size_t>(draws.below(buffer.size()));
            std::swap(buffer[j], r);
            return go_on = emit(std::move(r));
          });
          if (!go_on || is_stopping()) return;
        }
        while (!buffer.empty()) {  // the end of a cycle: the buffer in random order
          const size_t j = static_cast<size_t>(draws.below(buffer.size()));
          std::swap(buffer[j], buffer.back());
          Record r = std::move(buffer.back());
          buffer.pop_back();
          if (!emit(std::move(r))) return;
        }
        if (samples_in_cycle == 0)
          throw DataError("rank " + std::to_string(rank_) + "'s shards hold no samples",
                          "members " + tar::image_member_names() + " with KEY.cls or KEY.json", "");
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!stopping_) error_ = std::current_exception();
    }
    produced_.notify_all();
  }

  bool is_stopping() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stopping_;
  }

  // One tar stream: consecutive members with one key are a sample, given to
  // `sample` (which returns false to stop reading).
  template <class Sample>
  void read_shard(const std::string& command, Sample&& sample) const {
    Command source(command);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      command_pid_ = source.pid();
      command_ = command;
      command_bytes_ = 0;
    }
    struct Clear {
      const StreamedShards* self;
      ~Clear() {
        std::lock_guard<std::mutex> lock(self->mutex_);
        self->command_pid_ = 0;
      }
    } clear{this};
    const std::string shard = source.name();
    std::string key, long_name;
    Record current;
    bool image = false, labelled = false, masked = false;
    std::vector<std::string> extensions;  // of the current key's members: a second one is refused
    std::exception_ptr json_error;        // a KEY.json that is no label: an error only without KEY.cls
    bool cls_label = false;               // the label came from KEY.cls: a KEY.json beside it is metadata
    auto flush = [&]() {
      if (json_error && !cls_label) std::rethrow_exception(json_error);
      json_error = nullptr;
      if (key.empty() || (!image && !labelled && !masked)) return true;  // nothing, or a __meta__-like member
      const std::string where = shard + ", sample '" + key + "'";
      if (!image) throw DataError(where + " has no image member", tar::image_member_names(), "");
      const bool masks = !mask_member_.empty();
      if (masks && !masked)
        throw DataError(where + " has no mask member", "expected KEY." + mask_member_ + " (target: mask, mask_member)",
                        "check mask_member against the shard's member names");
      if (!masks && !labelled)
        throw DataError(where + " has no label member", "KEY.cls or KEY.json with \"label\"", "");
      if (!masks && current.label >= classes_)
        throw DataError(where + " has label " + std::to_string(current.label),
                        "labels 0.." + std::to_string(classes_ - 1) + " (num_classes " + std::to_string(classes_) + ")",
                        "");
      Record done = std::move(current);
      current = Record{};
      image = labelled = masked = false;
      return sample(std::move(done));
    };
    char h[tar::kBlock];
    uint64_t at = 0;
    while (source.read(h, tar::kBlock, "a member header at byte " + std::to_string(at))) {
      if (std::all_of(h, h + tar::kBlock, [](char c) { return c == 0; })) break;  // end-of-archive blocks
      if (!tar::checksum_ok(h))
        throw DataError(shard + ": the header at byte " + std::to_string(at) + " has a wrong checksum",
                        "a tar stream (WebDataset shard)", "check the command's output; is it a tar at all?");
      // A stream's length is unknown: a size is bounded by what arrives (read_member) and,
      // for what is held in memory, by kMaxMemberBytes / kMaxNameRecordBytes.
      const uint64_t size = tar::member_size(h, at, UINT64_MAX - 2 * tar::kBlock - at, shard);
      const uint64_t padded = (size + tar::kBlock - 1) / tar::kBlock * tar::kBlock;
      const char type = h[156];
      const std::string path = long_name.empty() ? tar::header_path(h) : long_name;
      const std::string member = "a member, '" + path + "' at byte " + std::to_string(at);
      const auto bounded = [&](uint64_t limit, const char* kind) {
        if (size > limit)
          throw DataError(shard + ": the member '" + path + "' at byte " + std::to_string(at) + " says " +
                              std::to_string(size) + " bytes",
                          "expected at most " + std::to_string(limit) + " bytes per " + kind + " read from a stream",
                          "the header is damaged, or the member is not what its name says");
      };
      long_name.clear();
      if (type == 'L' || type == 'x') {
        bounded(tar::kMaxNameRecordBytes, "long-name or pax record (1 MiB)");
        std::string body;
        source.read_member(body, size, member);
        source.skip(padded - size, member);
        long_name = tar::long_name(type, body);
      } else if (type == '0' || type == '\0') {
        const auto [member_key, ext] = tar::key_and_extension(path);
        if (member_key != key) {
          if (!flush()) return;
          key = member_key;
          extensions.clear();
          cls_label = false;
        }
        if (std::find(extensions.begin(), extensions.end(), ext) != extensions.end())
          throw DataError(
              shard + ", sample '" + key + "': a second member '" + path + "' at byte " + std::to_string(at),
              "expected one member per key and extension (the webdataset package refuses duplicates too)",
              "rewrite the shard with unique keys");
        extensions.push_back(ext);
        if (!mask_member_.empty() && ext == mask_member_) {  // first: "png" may name a mask beside a JPEG
          bounded(tar::kMaxMemberBytes, "image (256 MiB)");
          source.read_member(current.mask, size, member);
          current.mask_what = shard + ": " + path;
          masked = true;
        } else if (!image && tar::is_image_extension(ext)) {
          bounded(tar::kMaxMemberBytes, "image (256 MiB)");
          source.read_member(current.bytes, size, member);
          current.what = shard + ": " + path;
          image = true;
        } else if (ext == "cls" || (ext == "json" && !cls_label)) {
          std::string body;
          source.read_member(body, std::min<uint64_t>(size, 1 << 20), member);
          source.skip(size - body.size(), member);
          int64_t label = -1;
          try {
            label = tar::parse_label(body, ext, shard + ", member " + path);
          } catch (const DataError&) {
            if (ext == "cls") throw;
            json_error = std::current_exception();
          }
          if (label >= 0) current.label = label, labelled = true, cls_label = ext == "cls";
        } else {
          source.skip(size, member);
        }
        source.skip(padded - size, member);
      } else {
        source.skip(padded, member);  // directories, links, global pax headers
      }
      at += tar::kBlock + padded;
      std::lock_guard<std::mutex> lock(mutex_);
      command_bytes_ = at;
    }
    if (!flush()) return;
    source.drain();
    source.finish();
  }

  const uint64_t seed_;
  const int rank_, world_;
  const int64_t size_;
  const size_t buffer_, read_ahead_;
  const bool shuffle_shards_;
  const int64_t classes_;
  const std::string mask_member_;  ///< target: mask: the mask members' extension; empty: samples have classes
  const double start_timeout_;
  std::vector<std::string> commands_;

  mutable std::mutex mutex_;
  mutable std::condition_variable produced_, consumed_;
  mutable std::map<int64_t, Record> window_;  ///< read, not yet asked for
  mutable std::map<int64_t, Record> taken_;   ///< asked for, being decoded
  mutable std::exception_ptr error_;
  mutable bool stopping_ = false, started_ = false;
  mutable pid_t command_pid_ = 0;
  mutable std::string command_;  ///< the command running: named by the start-up timeout
  mutable uint64_t command_bytes_ = 0;
  mutable std::optional<std::chrono::steady_clock::time_point> start_deadline_;
  mutable std::thread reader_;
};

}  // namespace

std::shared_ptr<trainyard::Dataset> make_streamed_webdataset(const WebDatasetOptions& options,
                                                             const trainyard::Context& context) {
  return std::make_shared<StreamedShards>(options, context);
}

}  // namespace image_datasets
