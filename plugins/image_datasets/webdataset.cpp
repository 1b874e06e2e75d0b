// webdataset: samples from tar shards in the WebDataset convention: the
// members of one sample share a key (the member's path up to the first dot
// of its file name) and sit next to each other; KEY.jpg|jpeg|png is the
// image, KEY.cls its class (a decimal integer) or KEY.json an object with a
// "label" (or "cls") integer; with target: mask KEY.mask.png its mask, with
// target: boxes KEY.boxes.json its boxes (convert --from coco --coco-target
// boxes --to webdataset writes them: boxes_of_member says the form).
//
// Local shards are indexed once when the dataset is built (the tar headers
// only: 512 bytes read per member; an offset, a size, a label and the member's
// name kept per sample), and each
// sample is read by offset with pread (at most kMaxOpenShards shards open at
// once, opened on demand): the loader's per-epoch shuffle,
// rank split and exact resume work as for any indexed dataset, and memory
// does not grow with the data. Streamed shards (`pipe:COMMAND`):
// webdataset_stream.cpp.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>

#include <ATen/ATen.h>
#include <trainyard/error.h>
#include <nlohmann/json.hpp>

#include "annotated_dataset.h"
#include "tar.h"

namespace fs = std::filesystem;

namespace image_datasets {

std::vector<std::string> expand_braces(const std::string& pattern) {
  // Every {A..B} (numbers, zero-padded to A's width) or {x,y,z}, left to
  // right; the names are counted before any is made.
  struct Group {
    size_t open = 0, close = 0;
    bool range = false;
    long long first = 0, last = 0;
    size_t width = 0;
    std::vector<std::string> items;
    uint64_t count() const { return range ? uint64_t(last - first) + 1 : items.size(); }
  };
  std::vector<Group> groups;
  uint64_t names = 1;
  for (size_t at = 0, open; (open = pattern.find('{', at)) != std::string::npos;) {
    Group g;
    g.open = open;
    g.close = pattern.find('}', open);
    if (g.close == std::string::npos)
      throw trainyard::ConfigError("shard pattern '" + pattern + "' has a '{' without a '}'",
                                   "expected e.g. train-{000000..000146}.tar or {a,b}.tar", "");
    const std::string inside = pattern.substr(open + 1, g.close - open - 1);
    std::smatch range;
    if (std::regex_match(inside, range, std::regex("([0-9]+)\\.\\.([0-9]+)"))) {
      const std::string first = range[1], last = range[2];
      const auto digits = [](const std::string& d) { return d.size() - std::min(d.find_first_not_of('0'), d.size()); };
      if (digits(first) > 18 || digits(last) > 18)
        throw trainyard::ConfigError("shard pattern '" + pattern + "': range {" + inside + "}",
                                     "expected numbers of at most 18 digits", "");
      g.range = true, g.first = std::stoll(first), g.last = std::stoll(last), g.width = first.size();
      if (g.last < g.first)
        throw trainyard::ConfigError("shard pattern '" + pattern + "': range {" + inside + "}",
                                     "expected {FIRST..LAST} with FIRST <= LAST", "");
    } else {
      size_t start = 0;
      for (size_t comma; (comma = inside.find(',', start)) != std::string::npos; start = comma + 1)
        g.items.push_back(inside.substr(start, comma - start));
      g.items.push_back(inside.substr(start));
    }
    if (g.count() > kMaxShardNames / names)
      throw trainyard::ConfigError(
          "shard pattern '" + pattern + "' expands to more than " + std::to_string(kMaxShardNames) + " names",
          "expected at most " + std::to_string(kMaxShardNames) + " shards (the brace-pattern limit)",
          "check the ranges: each {A..B} multiplies the count of the others");
    names *= g.count();
    at = g.close + 1;
    groups.push_back(std::move(g));
  }
  std::vector<std::string> out{std::string()};
  size_t at = 0;
  for (const auto& g : groups) {
    const std::string literal = pattern.substr(at, g.open - at);
    std::vector<std::string> next;
    next.reserve(out.size() * g.count());
    for (const auto& prefix : out) {
      if (g.range) {
        for (long long i = g.first; i <= g.last; ++i) {
          std::string number = std::to_string(i);
          if (number.size() < g.width) number.insert(0, g.width - number.size(), '0');
          next.push_back(prefix + literal + number);
        }
      } else {
        for (const auto& item : g.items) next.push_back(prefix + literal + item);
      }
    }
    out = std::move(next);
    at = g.close + 1;
  }
  for (auto& name : out) name += pattern.substr(at);
  return out;
}

namespace {

using trainyard::BadRecord;
using trainyard::ConfigError;
using trainyard::DataError;

using tar::kBlock;

struct Member {
  std::string path;
  uint64_t header = 0;            ///< the byte its (last) header starts at: named in errors
  uint64_t offset = 0, size = 0;  ///< its data
};

// The regular files of a tar, in order, from its headers (ustar, GNU long
// names, pax `path` records). Every size is checked against the bytes left
// in the file before anything is read or allocated.
std::vector<Member> list_members(int fd, const std::string& shard) {
  std::vector<Member> members;
  const uint64_t file_size = static_cast<uint64_t>(lseek(fd, 0, SEEK_END));
  uint64_t at = 0;
  std::string long_name;
  std::string previous;  // "the member at byte N declares S bytes": said when the next header is wrong
  char h[kBlock];
  while (at + kBlock <= file_size) {
    if (pread(fd, h, kBlock, static_cast<off_t>(at)) != static_cast<ssize_t>(kBlock))
      throw DataError("shard " + shard + ": cannot read the header at byte " + std::to_string(at), "a readable tar",
                      "");
    if (std::all_of(h, h + kBlock, [](char c) { return c == 0; })) break;  // end-of-archive blocks
    if (!tar::checksum_ok(h))
      throw DataError("shard " + shard + ": the header at byte " + std::to_string(at) + " has a wrong checksum" +
                          (previous.empty() ? "" : " (" + previous + ")"),
                      "a tar file (WebDataset shard)",
                      previous.empty()
                          ? "check the shard; is it a tar at all?"
                          : "check the shard: a wrong size field before it puts this header at the wrong place");
    const uint64_t data = at + kBlock;
    const uint64_t size = tar::member_size(h, at, file_size - data, "shard " + shard);
    previous =
        "after the member at byte " + std::to_string(at) + ", whose size field says " + std::to_string(size) + " bytes";
    const char type = h[156];
    const std::string path = tar::header_path(h);
    if (type == 'L' || type == 'x') {  // the next member's name (GNU) or pax records ("LEN path=NAME\n")
      if (size > tar::kMaxNameRecordBytes)
        throw DataError("shard " + shard + ": the " + (type == 'L' ? "long-name" : "pax") + " record at byte " +
                            std::to_string(at) + " says " + std::to_string(size) + " bytes",
                        "expected at most " + std::to_string(tar::kMaxNameRecordBytes) + " bytes (1 MiB)",
                        "the header is damaged: check the shard");
      std::string body(size, '\0');
      if (pread(fd, body.data(), size, static_cast<off_t>(data)) != static_cast<ssize_t>(size))
        throw DataError("shard " + shard + ": cannot read the member at byte " + std::to_string(at), "a readable tar",
                        "");
      long_name = tar::long_name(type, body);
    } else if (type == '0' || type == '\0') {
      members.push_back({long_name.empty() ? path : long_name, at, data, size});
      long_name.clear();
    } else {
      long_name.clear();  // directories, links, global pax headers: not sample members
    }
    at = data + (size + kBlock - 1) / kBlock * kBlock;  // size <= file_size - data: no overflow
  }
  if (at < file_size && at + kBlock > file_size)
    throw DataError("shard " + shard + ": ends inside a member header at byte " + std::to_string(at), "a complete tar",
                    "the shard is truncated: copy it again");
  return members;
}

struct Sample {
  uint32_t shard = 0;
  uint64_t offset = 0, size = 0;  ///< the image member's bytes
  int64_t label = -1;
  std::string member;                       ///< its path in the shard: named in errors
  uint64_t mask_offset = 0, mask_size = 0;  ///< target: mask or boxes: the mask or boxes member's bytes
  std::string mask;                         ///< target: mask or boxes: that member's path
};

// A KEY.boxes.json member: {"height": H, "width": W, "boxes": [[x1, y1, x2,
// y2], ...] in the image's pixels, "labels": [class, ...], and optionally
// "crowd": [0|1, ...] and "area": [...] (default: not crowd, the box's area)}.
// Throws BadRecord "WHERE: ..." for another form; check_stored_boxes checks the values.
SampleAnnotations boxes_of_member(const std::string& body, const std::string& where) {
  using Json = nlohmann::json;
  const Json j = Json::parse(body, nullptr, false);
  const auto bad = [&](const std::string& found) {
    throw trainyard::BadRecord(where + ": " + found +
                               "; expected {\"height\": H, \"width\": W, \"boxes\": [[x1, y1, x2, y2], ...], "
                               "\"labels\": [...]} and optionally \"crowd\" and \"area\" lists of as many");
  };
  if (j.is_discarded() || !j.is_object()) bad("not a JSON object");
  const auto side = [&](const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 1048576)
      bad(std::string("\"") + key + "\" missing or not a size from 1 to 1048576");
    return static_cast<int>(it->get<int64_t>());
  };
  SampleAnnotations a{cv::Size(side("width"), side("height")), {}, std::nullopt};
  const auto list = [&](const char* key, bool required) -> const Json* {
    const auto it = j.find(key);
    if (it == j.end() && !required) return nullptr;
    if (it == j.end() || !it->is_array()) bad(std::string("\"") + key + "\" missing or not a list");
    return &*it;
  };
  const Json& boxes = *list("boxes", true);
  const Json& labels = *list("labels", true);
  const Json* crowd = list("crowd", false);
  const Json* area = list("area", false);
  for (const Json* l : {&labels, crowd, area})
    if (l && l->size() != boxes.size())
      bad(std::to_string(boxes.size()) + " boxes and a list of " + std::to_string(l->size()));
  for (size_t k = 0; k < boxes.size(); ++k) {
    const Json& b = boxes[k];
    if (!b.is_array() || b.size() != 4 || !std::all_of(b.begin(), b.end(), [](const Json& v) { return v.is_number(); }))
      bad("box " + std::to_string(k) + " is " + b.dump().substr(0, 80) + ", not 4 numbers");
    StoredBox s;
    for (size_t c = 0; c < 4; ++c) s.box[c] = b[c].get<double>();
    if (!labels[k].is_number_integer()) bad("label " + std::to_string(k) + " is not an integer");
    s.label = labels[k].get<int64_t>();
    if (crowd) {
      const Json& c = (*crowd)[k];
      if (!c.is_number_integer() || (c.get<int64_t>() != 0 && c.get<int64_t>() != 1))
        bad("crowd " + std::to_string(k) + " is " + c.dump().substr(0, 20) + ", not 0 or 1");
      s.crowd = c.get<int64_t>() == 1;
    }
    if (area && !(*area)[k].is_number()) bad("area " + std::to_string(k) + " is not a number");
    s.area = area ? (*area)[k].get<double>() : (s.box[2] - s.box[0]) * (s.box[3] - s.box[1]);
    a.boxes.push_back(s);
  }
  return a;
}

constexpr size_t kMaxOpenShards = 64;

// Shards open at once, at most kMaxOpenShards: opened when a sample needs
// one, the least recently used closed (after its last reader is done).
class OpenShards {
 public:
  explicit OpenShards(const std::vector<std::string>& paths) : paths_(paths), files_(paths.size()) {}

  struct File {
    int fd = -1;
    uint64_t used = 0;
    ~File() {
      if (fd >= 0) ::close(fd);
    }
  };

  std::shared_ptr<File> get(uint32_t shard) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& f = files_[shard];
    if (!f) {
      if (open_.size() >= kMaxOpenShards) {
        const auto oldest = std::min_element(open_.begin(), open_.end(),
                                             [&](uint32_t a, uint32_t b) { return files_[a]->used < files_[b]->used; });
        files_[*oldest].reset();  // closed when the last pread on it returns
        open_.erase(oldest);
      }
      auto file = std::make_shared<File>();
      file->fd = ::open(paths_[shard].c_str(), O_RDONLY | O_CLOEXEC);
      if (file->fd < 0) throw BadRecord("shard " + paths_[shard] + ": cannot be opened: " + std::strerror(errno));
      f = std::move(file);
      open_.push_back(shard);
    }
    f->used = ++clock_;
    return f;
  }

 private:
  const std::vector<std::string>& paths_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<File>> files_;
  std::vector<uint32_t> open_;
  uint64_t clock_ = 0;
};

// Indexed shards: the index and the reading of members. Base is
// ImageDataset (Shards: classes and masks) or AnnotatedImageDataset
// (ShardBoxes: target: boxes); each calls describe_shards() once its reading
// is in place.
template <class Base>
class ShardsOf : public Base {
 public:
  explicit ShardsOf(const WebDatasetOptions& o)
      : Base(checked_transforms(o)),
        boxes_(o.target == "boxes"),
        mask_member_(o.target == "mask" ? o.mask_member
                     : boxes_           ? o.box_member
                                        : "") {
    const std::string pattern = o.urls;
    source_ = "urls '" + pattern + "'";
    paths_ = expand_braces(pattern);
    files_ = std::make_unique<OpenShards>(paths_);
    for (size_t s = 0; s < paths_.size(); ++s) index_shard(s);
    if (samples_.empty())
      throw DataError("urls: '" + pattern + "': " + std::to_string(paths_.size()) + " shards hold no samples",
                      "members " + tar::image_member_names() + " with " + sample_members(), "");
    if (boxes_) {
      if (o.num_classes < 1)
        throw ConfigError("target: boxes with num_classes: " + std::to_string(o.num_classes),
                          "expected num_classes: K, the box classes (labels 0 to K-1)",
                          "set num_classes to the number of categories");
      classes_ = o.num_classes;
      return;
    }
    if (!mask_member_.empty()) return;  // the classes are mask_classes (describe)
    int64_t classes = o.num_classes;
    const Sample* top_sample = &samples_.front();
    for (const auto& s : samples_)
      if (s.label > top_sample->label) top_sample = &s;
    const int64_t top = top_sample->label;
    // The class count taken from the largest label sizes the network's head
    // and the meters' tables: one damaged .cls ("3000000000") must not become
    // a layer of three billion outputs. A larger count is given explicitly.
    constexpr int64_t kLargestDerivedCount = 1000000;
    if (classes == 0 && top >= kLargestDerivedCount)
      throw DataError("num_classes: 0 counts the classes as the largest label + 1, and " + paths_[top_sample->shard] +
                          ", member " + top_sample->member + " has label " + std::to_string(top),
                      "expected labels below " + std::to_string(kLargestDerivedCount) + " when num_classes is 0",
                      "check that member's label; with that many classes, set num_classes to their number");
    if (classes == 0) classes = top + 1;
    if (top >= classes)
      throw ConfigError(
          "num_classes: " + std::to_string(classes) + ", but the shards hold label " + std::to_string(top),
          "labels 0.." + std::to_string(classes - 1), "raise num_classes or set it to 0 (the largest label + 1)");
    classes_ = classes;
  }
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }

 protected:
  void describe_shards() { this->describe(classes_, {}, source_); }

  // Sample `index`'s image member, its bytes read.
  SourceImage image_of(int64_t index) const {
    const Sample& s = samples_.at(static_cast<size_t>(index));
    SourceImage image;
    image.what = paths_[s.shard] + ": " + s.member;
    image.bytes = read_member(s.shard, s.offset, s.size, image.what);
    return image;
  }
  // Sample `index`'s mask or boxes member, its bytes read; nothing for a sample of classes.
  std::optional<SourceImage> mask_of(int64_t index) const {
    const Sample& s = samples_.at(static_cast<size_t>(index));
    if (s.mask.empty()) return std::nullopt;
    SourceImage mask;
    mask.what = member_what(index);
    mask.bytes = read_member(s.shard, s.mask_offset, s.mask_size, mask.what);
    return mask;
  }
  int64_t label_of(int64_t index) const { return samples_.at(static_cast<size_t>(index)).label; }

  // target: boxes: sample `index`'s KEY.boxes.json, read and parsed (not checked).
  SampleAnnotations read_boxes(int64_t index) const {
    const Sample& s = samples_.at(static_cast<size_t>(index));
    const std::string what = member_what(index);
    if (s.mask_size > kMaxBoxesBytes)
      throw BadRecord(what + ": " + std::to_string(s.mask_size) + " bytes, expected at most " +
                      std::to_string(kMaxBoxesBytes) + " (16 MiB) of boxes");
    return boxes_of_member(mask_of(index).value().bytes, what);
  }
  std::string member_what(int64_t index) const {
    const Sample& s = samples_.at(static_cast<size_t>(index));
    return paths_[s.shard] + ": " + s.mask;
  }

 private:
  static constexpr uint64_t kMaxBoxesBytes = uint64_t{16} << 20;

  std::string read_member(uint32_t shard, uint64_t offset, uint64_t size, const std::string& what) const {
    std::string bytes(size, '\0');
    const auto file = files_->get(shard);
    if (pread(file->fd, bytes.data(), size, static_cast<off_t>(offset)) != static_cast<ssize_t>(size))
      throw BadRecord(what + ": cannot read " + std::to_string(size) + " bytes");
    return bytes;
  }

  // What a sample holds besides its image: a class, its mask or its boxes.
  std::string sample_members() const {
    if (boxes_) return "KEY." + mask_member_ + " (box_member)";
    return mask_member_.empty() ? "KEY.cls or KEY.json" : "KEY." + mask_member_ + " (mask_member)";
  }

  void index_shard(size_t s) {
    const std::string& path = paths_[s];
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw ConfigError("shard '" + path + "' cannot be opened: " + std::strerror(errno),
                        "a readable tar file for every name the pattern expands to", "check urls and the files");
    struct Close {
      int fd;
      ~Close() { ::close(fd); }
    } close{fd};  // indexed one at a time: a run opens shards on demand (OpenShards)
    const std::vector<Member> members = list_members(fd, path);
    // Consecutive members with one key form a sample.
    for (size_t i = 0; i < members.size();) {
      const std::string key = tar::key_and_extension(members[i].path).first;
      const std::string where = "shard " + path + ", sample '" + key + "'";
      Sample sample;
      sample.shard = static_cast<uint32_t>(s);
      const Member *image = nullptr, *cls = nullptr, *json = nullptr, *mask = nullptr;
      std::vector<std::string> extensions;
      for (; i < members.size() && tar::key_and_extension(members[i].path).first == key; ++i) {
        const auto& m = members[i];
        const std::string ext = tar::key_and_extension(m.path).second;
        if (std::find(extensions.begin(), extensions.end(), ext) != extensions.end())
          throw DataError(where + ": a second member '" + m.path + "' at byte " + std::to_string(m.header),
                          "expected one member per key and extension (the webdataset package refuses duplicates too)",
                          "rewrite the shard with unique keys");
        extensions.push_back(ext);
        if (!mask_member_.empty() && ext == mask_member_)  // first: "png" may name a mask beside a JPEG
          mask = &m;
        else if (!image && tar::is_image_extension(ext))
          image = &m;
        else if (ext == "cls")
          cls = &m;
        else if (ext == "json")
          json = &m;
      }
      // KEY.cls gives the class; KEY.json only without it, and only when it has "label" or "cls".
      if (cls)
        sample.label = read_label(fd, *cls, path, "cls");
      else if (json)
        sample.label = read_label(fd, *json, path, "json");
      const bool masks = !mask_member_.empty();
      if (!image && !mask && sample.label < 0) continue;  // e.g. a __meta__ member: not a sample
      if (!image) throw DataError(where + " has no image member", tar::image_member_names(), "");
      if (masks && !mask)
        throw DataError(
            where + " has no " + (boxes_ ? "boxes" : "mask") + " member",
            "expected KEY." + mask_member_ + (boxes_ ? " (target: boxes, box_member)" : " (target: mask, mask_member)"),
            std::string("check ") + (boxes_ ? "box_member" : "mask_member") + " against the shard's member names");
      if (!masks && sample.label < 0)
        throw DataError(where + " has no label member", "KEY.cls or KEY.json with \"label\"", "");
      for (const Member* m : {image, mask})
        if (m && m->size > tar::kMaxMemberBytes)
          throw DataError(where + ": the image member '" + m->path + "' at byte " + std::to_string(m->header) +
                              " has " + std::to_string(m->size) + " bytes",
                          "expected at most " + std::to_string(tar::kMaxMemberBytes) + " bytes (256 MiB) per image",
                          "");
      sample.offset = image->offset, sample.size = image->size, sample.member = image->path;
      if (mask) sample.mask_offset = mask->offset, sample.mask_size = mask->size, sample.mask = mask->path;
      samples_.push_back(sample);
    }
  }

  static int64_t read_label(int fd, const Member& m, const std::string& shard, const std::string& ext) {
    std::string text(std::min<uint64_t>(m.size, 1 << 20), '\0');
    if (pread(fd, text.data(), text.size(), static_cast<off_t>(m.offset)) != static_cast<ssize_t>(text.size()))
      throw DataError("shard " + shard + ": cannot read " + m.path, "a readable tar", "");
    return tar::parse_label(text, ext, "shard " + shard + ", member " + m.path);
  }

  bool boxes_;               ///< target: boxes
  std::string mask_member_;  ///< target: mask or boxes: the mask or boxes members' extension; empty: classes
  int64_t classes_ = 0;      ///< for describe(): 0 with target: mask (mask_classes)
  std::string source_;       ///< "urls 'PATTERN'": named in describe()'s errors
  std::vector<std::string> paths_;
  std::unique_ptr<OpenShards> files_;
  std::vector<Sample> samples_;
};

// Classes (KEY.cls or KEY.json) or, with target: mask, masks.
class Shards final : public ShardsOf<ImageDataset> {
 public:
  explicit Shards(const WebDatasetOptions& o) : ShardsOf(o) { describe_shards(); }

 protected:
  LoadedSample load(int64_t index) const override {
    LoadedSample out;
    out.inputs.push_back(image_of(index));
    if (std::optional<SourceImage> mask = mask_of(index))
      out.targets.push_back(std::move(*mask));
    else
      out.label = at::scalar_tensor(label_of(index), at::kLong);
    return out;
  }
};

// target: boxes: each sample's KEY.boxes.json as its fields.
class ShardBoxes final : public ShardsOf<AnnotatedImageDataset> {
 public:
  explicit ShardBoxes(const WebDatasetOptions& o) : ShardsOf(o) { describe_shards(); }

 protected:
  AnnotatedSample read_annotated(int64_t index) const override {
    AnnotatedSample out;
    out.annotations = read_boxes(index);
    check_stored_boxes(out.annotations.boxes, out.annotations.stored, info().num_classes, member_what(index));
    SourceImage image = image_of(index);
    image.expected_size = out.annotations.stored;  // the boxes' pixels are the image's
    out.sample.inputs.push_back(std::move(image));
    return out;
  }
};

const trainyard::TypedSchema<WebDatasetOptions>& webdataset_typed_schema() {
  static const trainyard::TypedSchema<WebDatasetOptions> s = [] {
    using O = WebDatasetOptions;
    trainyard::TypedSchema<O> t;
    t.require_path(
        "urls", &O::urls,
        "shard files: a path or brace pattern such as data/train-{000000..000146}.tar (relative to the experiment "
        "file; indexed, read by offset), or pipe:COMMAND such as 'pipe:curl -sf "
        "https://host/train-{000000..000146}.tar' "
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
    t.add("read_ahead", &O::read_ahead, 1024, "pipe: only: samples read ahead of the decode threads").range(1, 1000000);
    t.add("start_timeout", &O::start_timeout, 60.0,
          "pipe: only: seconds to wait at start-up for the first sample (the command that has not written it is "
          "named and ended)")
        .above(0);
    t.add("mask_member", &O::mask_member, "mask.png",
          "target: mask: the extension of each sample's mask member, a grey PNG of class ids (KEY.mask.png, as "
          "trainyard convert --from parallel --to webdataset writes it; KEY.seg.png: seg.png)");
    t.add("box_member", &O::box_member, "boxes.json",
          "target: boxes (local shards): the extension of each sample's boxes member, JSON with height, width, "
          "boxes [[x1, y1, x2, y2], ...], labels, and optionally crowd and area (KEY.boxes.json, as trainyard "
          "convert --from coco --coco-target boxes --to webdataset writes it)");
    add_transform_options(t, /*boxes=*/true);
    return t;
  }();
  return s;
}

}  // namespace

trainyard::Schema webdataset_schema() { return webdataset_typed_schema().schema(); }

std::shared_ptr<trainyard::Dataset> make_webdataset(const trainyard::Options& options,
                                                    const trainyard::Context& context) {
  const WebDatasetOptions o = webdataset_typed_schema().bind(options);
  if (o.urls.rfind("pipe:", 0) == 0) {
    if (o.target == "boxes")
      throw ConfigError("target: boxes with pipe: urls", "expected local shard files for target: boxes",
                        "copy the shards to local files (streamed shards carry classes and masks only)");
    return make_streamed_webdataset(o, context);
  }
  if (o.target == "boxes") return std::make_shared<ShardBoxes>(o);
  return std::make_shared<Shards>(o);
}

}  // namespace image_datasets
