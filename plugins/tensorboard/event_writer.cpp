#include "event_writer.h"

#include <unistd.h>

#include <algorithm>
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

void double_field(std::string& out, int field, double v) {
  key(out, field, 1);
  little_endian(out, v);
}

// A Summary.Value carrying only plugin metadata, as the hparams plugin reads it.
std::string hparams_value(const std::string& tag, const std::string& plugin_data) {
  std::string plugin;
  bytes_field(plugin, 1, "hparams");
  bytes_field(plugin, 2, plugin_data);
  std::string metadata;
  bytes_field(metadata, 1, plugin);
  std::string value;
  bytes_field(value, 1, tag);
  bytes_field(value, 9, metadata);
  std::string summary;
  bytes_field(summary, 1, value);
  return summary;
}

std::string event_with_summary(double wall_time, int64_t step, const std::string& summary) {
  std::string event;
  double_field(event, 1, wall_time);
  key(event, 2, 0);
  varint(event, static_cast<uint64_t>(step));
  bytes_field(event, 5, summary);
  return event;
}

// google.protobuf.Value: number_value = 2, string_value = 3, bool_value = 4.
std::string struct_value(const HParamValue& v) {
  std::string out;
  if (const double* d = std::get_if<double>(&v))
    double_field(out, 2, *d);
  else if (const std::string* s = std::get_if<std::string>(&v))
    bytes_field(out, 3, *s);
  else
    key(out, 4, 0), varint(out, std::get<bool>(v) ? 1 : 0);
  return out;
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

std::string hparams_start_event(double wall_time, const std::map<std::string, HParamValue>& hparams) {
  std::string start;  // SessionStartInfo { map<string, Value> hparams = 1; double start_time_secs = 5; }
  for (const auto& [name, value] : hparams) {
    std::string entry;
    bytes_field(entry, 1, name);
    bytes_field(entry, 2, struct_value(value));
    bytes_field(start, 1, entry);
  }
  double_field(start, 5, wall_time);
  std::string data;  // HParamsPluginData { version = 1 (0: omitted); session_start_info = 3; }
  bytes_field(data, 3, start);
  return event_with_summary(wall_time, 0, hparams_value("_hparams_/session_start_info", data));
}

std::string hparams_experiment_event(double wall_time, const std::map<std::string, HParamValue>& hparams,
                                     const std::vector<std::string>& metric_tags) {
  std::string experiment;  // Experiment { hparam_infos = 4; metric_infos = 5; time_created_secs = 3; }
  double_field(experiment, 3, wall_time);
  for (const auto& [name, value] : hparams) {
    std::string info;  // HParamInfo { name = 1; type = 4 (DataType: 1 string, 2 bool, 3 float64) }
    bytes_field(info, 1, name);
    key(info, 4, 0);
    varint(info, std::holds_alternative<double>(value) ? 3 : std::holds_alternative<bool>(value) ? 2 : 1);
    bytes_field(experiment, 4, info);
  }
  for (const auto& tag : metric_tags) {
    std::string name;  // MetricName { group = 1; tag = 2; }
    bytes_field(name, 2, tag);
    std::string info;  // MetricInfo { name = 1; }
    bytes_field(info, 1, name);
    bytes_field(experiment, 5, info);
  }
  std::string data;
  bytes_field(data, 2, experiment);
  return event_with_summary(wall_time, 0, hparams_value("_hparams_/experiment", data));
}

std::string hparams_end_event(double wall_time, bool success) {
  std::string end;  // SessionEndInfo { Status status = 1 (1 success, 2 failure); double end_time_secs = 2; }
  key(end, 1, 0);
  varint(end, success ? 1 : 2);
  double_field(end, 2, wall_time);
  std::string data;
  bytes_field(data, 4, end);
  return event_with_summary(wall_time, 0, hparams_value("_hparams_/session_end_info", data));
}

std::string histogram_event(double wall_time, int64_t step, const std::string& tag, const std::vector<double>& values,
                            int buckets) {
  // HistogramProto { min = 1; max = 2; num = 3; sum = 4; sum_squares = 5; bucket_limit = 6; bucket = 7; } (packed)
  double lo = values.empty() ? 0 : values[0], hi = lo, sum = 0, squares = 0;
  for (double v : values) lo = std::min(lo, v), hi = std::max(hi, v), sum += v, squares += v * v;
  std::vector<double> counts(static_cast<size_t>(buckets), 0.0), limits(static_cast<size_t>(buckets));
  const double width = hi > lo ? (hi - lo) / buckets : 1.0;
  for (int k = 0; k < buckets; ++k) limits[size_t(k)] = lo + width * (k + 1);
  for (double v : values) counts[size_t(std::min(buckets - 1, static_cast<int>((v - lo) / width)))] += 1;
  std::string histo;
  double_field(histo, 1, lo);
  double_field(histo, 2, hi);
  double_field(histo, 3, static_cast<double>(values.size()));
  double_field(histo, 4, sum);
  double_field(histo, 5, squares);
  for (int field : {6, 7}) {
    std::string packed;
    for (double v : field == 6 ? limits : counts) little_endian(packed, v);
    bytes_field(histo, field, packed);
  }
  std::string value;
  bytes_field(value, 1, tag);
  bytes_field(value, 5, histo);
  std::string summary;
  bytes_field(summary, 1, value);
  return event_with_summary(wall_time, step, summary);
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
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw trainyard::ConfigError("tensorboard: cannot create the folder " + dir + " (" + ec.message() + ")",
                                 "expected a folder this user can write the event files in",
                                 "choose another dir or fix its permissions");
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

void EventWriter::histogram(int64_t step, const std::string& tag, const std::vector<double>& values) {
  write(histogram_event(now_seconds(), step, tag, values));
}

void EventWriter::write(const std::string& payload) {
  const std::string r = record(payload);
  if (std::fwrite(r.data(), 1, r.size(), file_) != r.size())
    throw trainyard::Error("tensorboard: cannot write " + path_);
  // Scalars every iteration: flushed at most once a second (and at each
  // test pass, epoch end and the end), not one system call per event.
  if (now_seconds() - last_flush_ >= 1.0) flush();
}

void EventWriter::flush() {
  if (std::fflush(file_) != 0) throw trainyard::Error("tensorboard: cannot write " + path_);
  last_flush_ = now_seconds();
}

}  // namespace tensorboard
