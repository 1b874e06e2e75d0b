#pragma once
// TensorBoard event files without TensorFlow or libprotobuf: the TFRecord
// framing (length, masked CRC-32C of the length, payload, masked CRC-32C of
// the payload) around tensorflow.Event messages encoded by hand. Only the
// fields scalars need are written:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

namespace tensorboard {

/// CRC-32C (Castagnoli), as TFRecord uses it.
uint32_t crc32c(const std::string& data);
/// TFRecord's mask: rotate right by 15 and add a constant.
uint32_t masked_crc(const std::string& data);

/// One serialized Event holding scalars.
std::string scalar_event(double wall_time, int64_t step, const std::map<std::string, double>& values);
/// The first event of a file: file_version "brain.Event:2".
std::string version_event(double wall_time);
/// A TFRecord frame around `payload`.
std::string record(const std::string& payload);

class EventWriter {
 public:
  /// Creates DIR/events.out.tfevents.<seconds>.<host>.<pid> and writes the version event.
  explicit EventWriter(const std::string& dir);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;
  void scalars(int64_t step, const std::map<std::string, double>& values);
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& payload);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace tensorboard
