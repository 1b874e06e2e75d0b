#include "tar.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <trainyard/error.h>
#include <trainyard/image_codec.h>
#include <nlohmann/json.hpp>

namespace image_datasets::tar {

uint64_t number(const char* field, size_t width) {
  const auto* p = reinterpret_cast<const unsigned char*>(field);
  uint64_t v = 0;
  if (p[0] & 0x80) {
    for (size_t i = 1; i < width; ++i) v = (v << 8) | p[i];
    return v;
  }
  for (size_t i = 0; i < width && p[i]; ++i)
    if (p[i] >= '0' && p[i] <= '7') v = v * 8 + (p[i] - '0');
  return v;
}

uint64_t member_size(const char* h, uint64_t at, uint64_t left, const std::string& where) {
  using trainyard::DataError;
  const auto* f = reinterpret_cast<const unsigned char*>(h + 124);
  const std::string field = where + ": the size field of the header at byte " + std::to_string(at) + " (byte " +
                            std::to_string(at + 124) + ")";
  uint64_t v = 0;
  if (f[0] & 0x80) {  // base-256 (GNU): big-endian in the 11 bytes after the marker byte 0x80
    if (f[0] != 0x80)
      throw DataError(field + " is a negative or oversized base-256 number",
                      "expected a member size of 0 or more bytes", "the header is damaged: check the shard");
    for (size_t i = 1; i < 12; ++i) {
      if (v >> 56)
        throw DataError(field + " is a base-256 number over 64 bits", "expected a member size that fits the shard",
                        "the header is damaged: check the shard");
      v = (v << 8) | f[i];
    }
  } else {
    size_t i = 0;
    while (i < 12 && f[i] == ' ') ++i;
    const size_t digits = i;
    for (; i < 12 && f[i] >= '0' && f[i] <= '7'; ++i)
      v = v * 8 + (f[i] - '0');  // 12 octal digits: 36 bits, no overflow
    const bool ended = i == 12 || f[i] == ' ' || f[i] == '\0';
    if (!ended || i == digits) {
      std::string shown;
      for (size_t k = 0; k < 12; ++k) shown += f[k] >= 32 && f[k] < 127 ? char(f[k]) : '.';
      throw DataError(field + " is '" + shown + "'",
                      "expected octal digits ended by a space or NUL, or a base-256 number",
                      "the header is damaged: check the shard");
    }
  }
  if (v > left)
    throw DataError(
        field + " says " + std::to_string(v) + " bytes, and only " + std::to_string(left) + " bytes follow the header",
        "expected a member size within the shard", "the shard is truncated: copy it again");
  return v;
}

std::string text(const char* field, size_t width) { return std::string(field, strnlen(field, width)); }

bool checksum_ok(const char* h) {
  uint64_t stored = 0;
  for (size_t i = 0; i < kBlock; ++i) stored += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
  return stored == number(h + 148, 8);
}

std::string header_path(const char* h) {
  std::string path = text(h, 100);
  if (std::memcmp(h + 257, "ustar", 5) == 0 && h[345]) path = text(h + 345, 155) + "/" + path;
  return path;
}

std::string long_name(char type, const std::string& body) {
  if (type == 'L') return body.c_str();
  const size_t p = body.find(" path=");
  return p == std::string::npos ? std::string() : body.substr(p + 6, body.find('\n', p) - p - 6);
}

std::pair<std::string, std::string> key_and_extension(const std::string& path) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {path, ""};
  std::string ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return {path.substr(0, dot), ext};
}

namespace {
constexpr std::initializer_list<trainyard::image_codec::Format> kMemberFormats{
    trainyard::image_codec::Format::jpeg, trainyard::image_codec::Format::png, trainyard::image_codec::Format::webp};
}  // namespace

bool is_image_extension(const std::string& ext) {
  const auto f = trainyard::image_codec::format_for_extension(ext);
  return std::find(kMemberFormats.begin(), kMemberFormats.end(), f) != kMemberFormats.end();
}

std::string image_member_names() {
  const std::vector<std::string> extensions = trainyard::image_codec::image_extensions(kMemberFormats);
  std::string out;
  for (size_t i = 0; i < extensions.size(); ++i)
    out += (i == 0 ? "" : i + 1 == extensions.size() ? " or " : ", ") + std::string("KEY.") + extensions[i];
  return out;
}

int64_t parse_label(const std::string& body, const std::string& ext, const std::string& where) {
  using trainyard::DataError;
  if (ext == "cls") {
    try {
      size_t used = 0;
      const long long v = std::stoll(body, &used);
      if (v >= 0 && body.find_first_not_of(" \t\r\n", used) == std::string::npos) return v;
    } catch (const std::exception&) {}
    throw DataError(where + ": '" + body.substr(0, 40) + "'", "a class index: a non-negative decimal integer", "");
  }
  const auto j = nlohmann::json::parse(body, nullptr, false);
  for (const char* field : {"label", "cls"})
    if (j.is_object() && j.contains(field) && j[field].is_number_integer() && j[field].get<int64_t>() >= 0)
      return j[field].get<int64_t>();
  if (j.is_object() && !j.contains("label") && !j.contains("cls")) return -1;  // metadata: not a label
  throw DataError(where + ": '" + body.substr(0, 60) + "'",
                  "a JSON object with a non-negative integer \"label\" (or \"cls\")", "");
}

}  // namespace image_datasets::tar
