#include "event_writer.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <trainyard/error.h>

namespace tensorboard {
namespace {

const std::array<uint32_t, 256> kTable = [] {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;  // reflected Castagnoli polynomial
    t[i] = c;
  }
  return t;
}();

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
template <class T>
void little_endian(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));  // x86-64 and arm64 are little-endian
  out.append(bytes, sizeof(T));
}
void key(std::string& out, int field, int wire_type) { varint(out, (uint64_t(field) << 3) | uint64_t(wire_type)); }
void bytes_field(std::string& out, int field, const std::string& value) {
  key(out, field, 2);
  varint(out, value.size());
  out += value;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const std::string& data) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : data) c = kTable[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t masked_crc(const std::string& data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string scalar_event(double wall_time, int64_t step, const std::map<std::string, double>& values) {
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    bytes_field(value, 1, tag);
    key(value, 2, 5);  // simple_value: float, fixed32
    little_endian(value, static_cast<float>(v));
    bytes_field(summary, 1, value);
  }
  std::string event;
  key(event, 1, 1);  // wall_time: double, fixed64
  little_endian(event, wall_time);
  key(event, 2, 0);  // step: int64, varint
  varint(event, static_cast<uint64_t>(step));
  bytes_field(event, 5, summary);
  return event;
}

std::string version_event(double wall_time) {
  std::string event;
  key(event, 1, 1);
  little_endian(event, wall_time);
  bytes_field(event, 3, "brain.Event:2");
  return event;
}

std::string record(const std::string& payload) {
  std::string length;
  little_endian(length, static_cast<uint64_t>(payload.size()));
  std::string out = length;
  little_endian(out, masked_crc(length));
  out += payload;
  little_endian(out, masked_crc(payload));
  return out;
}

EventWriter::EventWriter(const std::string& dir) {
  std::filesystem::create_directories(dir);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(now_seconds())) +
                                         "." + host + "." + std::to_string(::getpid())))
              .string();
  file_ = std::fopen(path_.c_str(), "ab");
  if (!file_) throw trainyard::Error("tensorboard: cannot create " + path_);
  write(version_event(now_seconds()));
}

EventWriter::~EventWriter() {
  if (file_) std::fclose(file_);
}

void EventWriter::scalars(int64_t step, const std::map<std::string, double>& values) {
  if (!values.empty()) write(scalar_event(now_seconds(), step, values));
}

void EventWriter::write(const std::string& payload) {
  const std::string r = record(payload);
  if (std::fwrite(r.data(), 1, r.size(), file_) != r.size() || std::fflush(file_) != 0)
    throw trainyard::Error("tensorboard: cannot write " + path_);
}

}  // namespace tensorboard
