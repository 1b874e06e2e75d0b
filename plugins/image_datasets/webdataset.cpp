// webdataset: samples from tar shards in the WebDataset convention: the
// members of one sample share a key (the member's path up to the first dot
// of its file name) and sit next to each other; KEY.jpg|jpeg|png is the
// image, KEY.cls its class (a decimal integer) or KEY.json an object with a
// "label" (or "cls") integer.
//
// Local shards are indexed once when the dataset is built (the tar headers
// only: 512 bytes read per member; an offset, a size, a label and the member's
// name kept per sample), and each
// sample is read by offset with pread: the loader's per-epoch shuffle,
// rank split and exact resume work as for any indexed dataset, and memory
// does not grow with the data. Streamed shards (`pipe:COMMAND`):
// webdataset_stream.cpp.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <regex>

#include <ATen/ATen.h>
#include <trainyard/error.h>

#include "image_dataset.h"
#include "tar.h"

namespace fs = std::filesystem;

namespace image_datasets {

std::vector<std::string> expand_braces(const std::string& pattern) {
  // The first {A..B} (numbers, zero-padded to A's width) or {x,y,z}; the rest recursively.
  const size_t open = pattern.find('{');
  if (open == std::string::npos) return {pattern};
  const size_t close = pattern.find('}', open);
  if (close == std::string::npos)
    throw trainyard::ConfigError("shard pattern '" + pattern + "' has a '{' without a '}'",
                                 "expected e.g. train-{000000..000146}.tar or {a,b}.tar", "");
  const std::string inside = pattern.substr(open + 1, close - open - 1);
  const std::string head = pattern.substr(0, open), tail = pattern.substr(close + 1);
  std::vector<std::string> choices;
  std::smatch range;
  if (std::regex_match(inside, range, std::regex("([0-9]+)\\.\\.([0-9]+)"))) {
    const std::string first = range[1], last = range[2];
    const long long a = std::stoll(first), b = std::stoll(last);
    if (b < a || b - a > 10'000'000)
      throw trainyard::ConfigError("shard pattern '" + pattern + "': range {" + inside + "}",
                                   "expected {FIRST..LAST} with FIRST <= LAST", "");
    for (long long i = a; i <= b; ++i) {
      std::string number = std::to_string(i);
      if (number.size() < first.size()) number.insert(0, first.size() - number.size(), '0');
      choices.push_back(number);
    }
  } else {
    size_t start = 0;
    for (size_t comma; (comma = inside.find(',', start)) != std::string::npos; start = comma + 1)
      choices.push_back(inside.substr(start, comma - start));
    choices.push_back(inside.substr(start));
  }
  std::vector<std::string> out;
  for (const auto& c : choices)
    for (auto& rest : expand_braces(tail)) out.push_back(head + c + rest);
  return out;
}

namespace {

using trainyard::BadRecord;
using trainyard::ConfigError;
using trainyard::DataError;

using tar::kBlock;

struct Member {
  std::string path;
  uint64_t offset = 0, size = 0;
};

// The regular files of a tar, in order, from its headers (ustar, GNU long
// names, pax `path` records).
std::vector<Member> list_members(int fd, const std::string& shard) {
  std::vector<Member> members;
  const uint64_t file_size = static_cast<uint64_t>(lseek(fd, 0, SEEK_END));
  uint64_t at = 0;
  std::string long_name;
  char h[kBlock];
  while (at + kBlock <= file_size) {
    if (pread(fd, h, kBlock, static_cast<off_t>(at)) != static_cast<ssize_t>(kBlock))
      throw DataError("shard " + shard + ": cannot read the header at byte " + std::to_string(at), "a readable tar", "");
    if (std::all_of(h, h + kBlock, [](char c) { return c == 0; })) break;  // end-of-archive blocks
    if (!tar::checksum_ok(h))
      throw DataError("shard " + shard + ": the header at byte " + std::to_string(at) + " has a wrong checksum",
                        "a tar file (WebDataset shard)", "check the shard; is it a tar at all?");
    const uint64_t size = tar::number(h + 124, 12), data = at + kBlock;
    if (data + size > file_size)
      throw DataError("shard " + shard + ": member at byte " + std::to_string(at) + " runs past the end (" +
                            std::to_string(size) + " bytes, " + std::to_string(file_size - data) + " left)",
                        "a complete tar", "the shard is truncated: copy it again");
    const char type = h[156];
    const std::string path = tar::header_path(h);
    if (type == 'L' || type == 'x') {  // the next member's name (GNU) or pax records ("LEN path=NAME\n")
      std::string body(size, '\0');
      if (pread(fd, body.data(), size, static_cast<off_t>(data)) != static_cast<ssize_t>(size))
        throw DataError("shard " + shard + ": cannot read the member at byte " + std::to_string(at), "a readable tar", "");
      long_name = tar::long_name(type, body);
    } else if (type == '0' || type == '\0') {
      members.push_back({long_name.empty() ? path : long_name, data, size});
      long_name.clear();
    } else {
      long_name.clear();  // directories, links, global pax headers: not sample members
    }
    at = data + (size + kBlock - 1) / kBlock * kBlock;
  }
  if (at < file_size && at + kBlock > file_size)
    throw DataError("shard " + shard + ": ends inside a member header at byte " + std::to_string(at),
                      "a complete tar", "the shard is truncated: copy it again");
  return members;
}

struct Sample {
  uint32_t shard = 0;
  uint64_t offset = 0, size = 0;  ///< the image member's bytes
  int64_t label = -1;
  std::string member;             ///< its path in the shard: named in errors
};

class Shards : public ImageDataset {
 public:
  explicit Shards(const WebDatasetOptions& o) : ImageDataset(checked_transforms(o)) {
    const std::string pattern = o.urls;
    paths_ = expand_braces(pattern);
    for (size_t s = 0; s < paths_.size(); ++s) index_shard(s);
    if (samples_.empty())
      throw DataError("urls: '" + pattern + "': " + std::to_string(paths_.size()) + " shards hold no samples",
                        "members KEY.jpg|png with KEY.cls or KEY.json", "");
    int64_t classes = o.num_classes;
    int64_t top = 0;
    for (const auto& s : samples_) top = std::max(top, s.label);
    if (classes == 0) classes = top + 1;
    if (top >= classes)
      throw ConfigError("num_classes: " + std::to_string(classes) + ", but the shards hold label " + std::to_string(top),
                        "labels 0.." + std::to_string(classes - 1), "raise num_classes or set it to 0 (the largest label + 1)");
    describe(classes, {}, "urls '" + pattern + "'");
  }
  ~Shards() override {
    for (int fd : fds_) ::close(fd);
  }
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }

 protected:
  LoadedSample load(int64_t index) const override {
    const Sample& s = samples_.at(static_cast<size_t>(index));
    SourceImage image;
    image.what = paths_[s.shard] + ": " + s.member;
    image.bytes.resize(s.size);
    if (pread(fds_[s.shard], image.bytes.data(), s.size, static_cast<off_t>(s.offset)) != static_cast<ssize_t>(s.size))
      throw BadRecord(image.what + ": cannot read " + std::to_string(s.size) + " bytes");
    LoadedSample out;
    out.inputs.push_back(std::move(image));
    out.label = at::scalar_tensor(s.label, at::kLong);
    return out;
  }

 private:
  void index_shard(size_t s) {
    const std::string& path = paths_[s];
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw ConfigError("shard '" + path + "' cannot be opened: " + std::strerror(errno),
                        "a readable tar file for every name the pattern expands to", "check urls and the files");
    fds_.push_back(fd);
    const std::vector<Member> members = list_members(fd, path);
    // Consecutive members with one key form a sample.
    for (size_t i = 0; i < members.size();) {
      const std::string key = tar::key_and_extension(members[i].path).first;
      Sample sample;
      sample.shard = static_cast<uint32_t>(s);
      bool image = false;
      for (; i < members.size() && tar::key_and_extension(members[i].path).first == key; ++i) {
        const auto& m = members[i];
        const std::string ext = tar::key_and_extension(m.path).second;
        if (!image && tar::is_image_extension(ext)) {
          sample.offset = m.offset, sample.size = m.size, sample.member = m.path, image = true;
        } else if (ext == "cls" || ext == "json") {
          sample.label = read_label(fd, m, path, ext);
        }
      }
      if (!image && sample.label < 0) continue;  // e.g. a __meta__ member: not a sample
      const std::string where = "shard " + path + ", sample '" + key + "'";
      if (!image) throw DataError(where + " has no image member", "KEY.jpg, KEY.jpeg, KEY.png or KEY.webp", "");
      if (sample.label < 0) throw DataError(where + " has no label member", "KEY.cls or KEY.json with \"label\"", "");
      samples_.push_back(sample);
    }
  }

  static int64_t read_label(int fd, const Member& m, const std::string& shard, const std::string& ext) {
    std::string text(std::min<uint64_t>(m.size, 1 << 20), '\0');
    if (pread(fd, text.data(), text.size(), static_cast<off_t>(m.offset)) != static_cast<ssize_t>(text.size()))
      throw DataError("shard " + shard + ": cannot read " + m.path, "a readable tar", "");
    return tar::parse_label(text, ext, "shard " + shard + ", member " + m.path);
  }

  std::vector<std::string> paths_;
  std::vector<int> fds_;
  std::vector<Sample> samples_;
};

const trainyard::TypedSchema<WebDatasetOptions>& webdataset_typed_schema() {
  static const trainyard::TypedSchema<WebDatasetOptions> s = [] {
    using O = WebDatasetOptions;
    trainyard::TypedSchema<O> t;
    t.require_path(
        "urls", &O::urls,
        "shard files: a path or brace pattern such as data/train-{000000..000146}.tar (relative to the experiment "
        "file; indexed, read by offset), or pipe:COMMAND such as 'pipe:curl -sf https://host/train-{000000..000146}.tar' "
        "(streamed from the command's standard output, run by /bin/sh in trainyard's working directory)");
    t.add("num_classes", &O::num_classes, 0,
          "number of classes; 0: the largest label + 1 (local shards only; pipe: needs it)")
        .min(0);
    t.add("size", &O::size, 0, "pipe: only: samples in one epoch over all ranks (a stream does not say its length)")
        .min(0);
    t.add("shuffle_buffer", &O::shuffle_buffer, 1000,
          "pipe: only: samples held to shuffle among (0: shard order); memory is this many "
          "encoded images plus read_ahead")
        .range(0, 1000000);
    t.add("shuffle_shards", &O::shuffle_shards, true,
          "pipe: only: shuffle the shard order every epoch (from seed and epoch)");
    t.add("read_ahead", &O::read_ahead, 1024, "pipe: only: samples read ahead of the decode threads")
        .range(1, 1000000);
    add_transform_options(t);
    return t;
  }();
  return s;
}

}  // namespace

trainyard::Schema webdataset_schema() { return webdataset_typed_schema().schema(); }

std::shared_ptr<trainyard::Dataset> make_webdataset(const trainyard::Options& options, const trainyard::Context& context) {
  const WebDatasetOptions o = webdataset_typed_schema().bind(options);
  if (o.urls.rfind("pipe:", 0) == 0) return make_streamed_webdataset(o, context);
  return std::make_shared<Shards>(o);
}

}  // namespace image_datasets
