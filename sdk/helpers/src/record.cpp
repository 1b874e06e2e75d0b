#include "trainyard/record.h"

#include <cstdio>
#include <cstring>
#include <sstream>

#include "trainyard/error.h"

namespace trainyard {
namespace {

const char kMagic[4] = {'T', 'Y', 'R', 'C'};

template <class T>
void put(std::string& out, T value) {  // little-endian on every supported host
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

struct Reader {
  const char* p;
  size_t left;
  template <class T>
  T get(const char* what) {
    if (left < sizeof(T)) throw BadRecord(std::string("truncated record: no room for ") + what);
    T v;
    std::memcpy(&v, p, sizeof v);
    p += sizeof v, left -= sizeof v;
    return v;
  }
  std::string bytes(size_t n, const char* what) {
    if (left < n)
      throw BadRecord(std::string("truncated record: ") + what + " needs " + std::to_string(n) + " bytes, " +
                      std::to_string(left) + " left");
    std::string s(p, n);
    p += n, left -= n;
    return s;
  }
};

bool holds_boxes(const Record& r) {
  for (const auto& l : r.labels)
    if (l.kind == Label::Kind::boxes) return true;
  return false;
}

}  // namespace

const char* encoding_name(ImageEncoding encoding) {
  switch (encoding) {
    case ImageEncoding::raw:
      return "raw";
    case ImageEncoding::png:
      return "png";
    case ImageEncoding::jpeg:
      return "jpeg";
  }
  return "?";
}

std::string encode_record(const Record& r) {
  std::string out(kMagic, 4);
  put<uint8_t>(out, holds_boxes(r) ? kBoxesRecordFormatVersion : kRecordFormatVersion);
  put<uint8_t>(out, static_cast<uint8_t>(r.images.size()));
  for (const auto& im : r.images) {
    put<uint8_t>(out, static_cast<uint8_t>(im.encoding));
    put<uint32_t>(out, im.rows);
    put<uint32_t>(out, im.cols);
    put<uint8_t>(out, im.channels);
    put<uint32_t>(out, static_cast<uint32_t>(im.bytes.size()));
    out += im.bytes;
  }
  put<uint8_t>(out, static_cast<uint8_t>(r.labels.size()));
  for (const auto& l : r.labels) {
    put<uint8_t>(out, static_cast<uint8_t>(l.kind));
    if (l.kind == Label::Kind::class_index) {
      put<int64_t>(out, l.index);
    } else {
      put<uint32_t>(out, static_cast<uint32_t>(l.values.size()));
      for (float v : l.values) put<float>(out, v);
    }
  }
  put<uint16_t>(out, static_cast<uint16_t>(r.id.size()));
  out += r.id;
  return out;
}

Record decode_record(const void* data, size_t size) {
  Reader in{static_cast<const char*>(data), size};
  if (in.bytes(4, "the magic") != std::string(kMagic, 4)) throw BadRecord("not a trainyard record (bad magic)");
  uint8_t version = in.get<uint8_t>("the version");
  if (version != kRecordFormatVersion && version != kBoxesRecordFormatVersion)
    throw BadRecord("record format version " + std::to_string(version) + ", this reader knows " +
                    std::to_string(kRecordFormatVersion) + " and " + std::to_string(kBoxesRecordFormatVersion));
  Record r;
  uint8_t images = in.get<uint8_t>("the image count");
  for (uint8_t i = 0; i < images; ++i) {
    EncodedImage im;
    uint8_t encoding = in.get<uint8_t>("an image encoding");
    if (encoding > 2) throw BadRecord("unknown image encoding " + std::to_string(encoding));
    im.encoding = static_cast<ImageEncoding>(encoding);
    im.rows = in.get<uint32_t>("image rows");
    im.cols = in.get<uint32_t>("image cols");
    im.channels = in.get<uint8_t>("image channels");
    // Checked before anything is decoded or allocated: a zero side makes an
    // empty image, a huge one an allocation that fails.
    if (im.rows == 0 || im.cols == 0 || im.channels == 0 || im.channels > 4)
      throw BadRecord("image of " + std::to_string(im.rows) + "x" + std::to_string(im.cols) + "x" +
                      std::to_string(im.channels) + ": expected at least 1x1x1 and 1 to 4 channels");
    if (im.rows > kMaxImageSide || im.cols > kMaxImageSide)
      throw BadRecord("image of " + std::to_string(im.rows) + "x" + std::to_string(im.cols) + ": expected at most " +
                      std::to_string(kMaxImageSide) + " pixels per side");
    uint32_t n = in.get<uint32_t>("the image size");
    im.bytes = in.bytes(n, "an image");
    if (im.encoding == ImageEncoding::raw && uint64_t(im.rows) * im.cols * im.channels != n)
      throw BadRecord("raw image of " + std::to_string(im.rows) + "x" + std::to_string(im.cols) + "x" +
                      std::to_string(im.channels) + " has " + std::to_string(n) + " bytes");
    r.images.push_back(std::move(im));
  }
  uint8_t labels = in.get<uint8_t>("the label count");
  for (uint8_t i = 0; i < labels; ++i) {
    uint8_t kind = in.get<uint8_t>("a label kind");
    if (kind > 2) throw BadRecord("unknown label kind " + std::to_string(kind));
    if (kind == 2 && version < kBoxesRecordFormatVersion)
      throw BadRecord("a boxes label (kind 2) in a version-" + std::to_string(version) + " record, expected version " +
                      std::to_string(kBoxesRecordFormatVersion));
    if (kind == 0) {
      r.labels.push_back(Label::class_index(in.get<int64_t>("a class index")));
    } else {
      uint32_t n = in.get<uint32_t>("a label length");
      // Checked before allocating: a damaged length must not ask for gigabytes (found by fuzz_record).
      if (uint64_t(n) * sizeof(float) > in.left)
        throw BadRecord("a label of " + std::to_string(n) + " values, but only " + std::to_string(in.left) +
                        " bytes are left in the record");
      if (kind == 2 && n % kBoxLabelValues != 0)
        throw BadRecord("a boxes label of " + std::to_string(n) + " values, expected " +
                        std::to_string(kBoxLabelValues) + " per box (x1, y1, x2, y2, class, crowd, area)");
      std::vector<float> v(n);
      for (auto& x : v) x = in.get<float>("a label value");
      r.labels.push_back(kind == 2 ? Label::boxes(std::move(v)) : Label::vector(std::move(v)));
    }
  }
  uint16_t id = in.get<uint16_t>("the id length");
  r.id = in.bytes(id, "the id");
  if (in.left != 0) throw BadRecord(std::to_string(in.left) + " unexpected bytes after the record");
  return r;
}

std::string record_key(int64_t index) {
  char key[16];
  std::snprintf(key, sizeof key, "%010lld", static_cast<long long>(index));
  return key;
}

std::string encode_metadata(const DatasetMetadata& m) {
  std::ostringstream s;
  s << "format_version=" << m.format_version << "\ncount=" << m.count << "\ninput_images=" << m.input_images << "\n";
  for (const auto& c : m.class_names) s << "class=" << c << "\n";
  for (const auto& shape : m.image_shapes) s << "image_shape=" << shape << "\n";
  if (!m.source.empty()) s << "source=" << m.source << "\n";
  return s.str();
}

DatasetMetadata decode_metadata(const std::string& text) {
  DatasetMetadata m;
  m.format_version = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) throw Error("metadata line without '=': " + line);
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    try {
      if (key == "format_version")
        m.format_version = std::stoll(value);
      else if (key == "count")
        m.count = std::stoll(value);
      else if (key == "input_images")
        m.input_images = std::stoll(value);
      else if (key == "class")
        m.class_names.push_back(value);
      else if (key == "image_shape")
        m.image_shapes.push_back(value);
      else if (key == "source")
        m.source = value;
      // Unknown keys are ignored: later minor versions may add some.
    } catch (const std::exception&) {
      throw Error("metadata '" + key + "' is not a number: " + value);
    }
  }
  if (m.format_version != kRecordFormatVersion && m.format_version != kBoxesRecordFormatVersion)
    throw Error("metadata format_version " + std::to_string(m.format_version) + ", this reader knows " +
                std::to_string(kRecordFormatVersion) + " and " + std::to_string(kBoxesRecordFormatVersion));
  return m;
}

}  // namespace trainyard
