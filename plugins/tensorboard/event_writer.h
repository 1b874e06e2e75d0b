#pragma once
// TensorBoard event files without TensorFlow or libprotobuf: the TFRecord
// framing (length, masked CRC-32C of the length, payload, masked CRC-32C of
// the payload) around tensorflow.Event messages encoded by hand. Only the
// fields scalars need are written:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; HistogramProto histo = 5; SummaryMetadata metadata = 9; }
// and the hparams plugin's HParamsPluginData (tensorboard/plugins/hparams/
// plugin_data.proto and api.proto) in a value's metadata, so that runs can be
// compared by their hyper-parameters in TensorBoard's HPARAMS tab.
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <variant>

#include <trainyard/run_config.h>
#include <vector>

namespace tensorboard {

/// CRC-32C (Castagnoli), as TFRecord uses it.
uint32_t crc32c(const std::string& data);
/// TFRecord's mask: rotate right by 15 and add a constant.
uint32_t masked_crc(const std::string& data);

/// One serialized Event holding scalars.
std::string scalar_event(double wall_time, int64_t step, const std::map<std::string, double>& values);
/// The first event of a file: file_version "brain.Event:2".
std::string version_event(double wall_time);
/// One hyper-parameter: a number, a string or a flag.
using HParamValue = trainyard::ConfigValue;
/// The three hparams summaries: the run's hyper-parameters at its start, the
/// experiment (which hyper-parameters and metric tags exist) and the end.
std::string hparams_start_event(double wall_time, const std::map<std::string, HParamValue>& hparams);
std::string hparams_experiment_event(double wall_time, const std::map<std::string, HParamValue>& hparams,
                                     const std::vector<std::string>& metric_tags);
std::string hparams_end_event(double wall_time, bool success);
/// A histogram of `values` in `buckets` equal-width buckets.
std::string histogram_event(double wall_time, int64_t step, const std::string& tag, const std::vector<double>& values,
                            int buckets = 30);

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
  void histogram(int64_t step, const std::string& tag, const std::vector<double>& values);
  /// Any serialized event (hparams_*_event).
  void event(const std::string& payload) { write(payload); }
  /// Writes out what is buffered (done at least once a second anyway).
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& payload);
  std::string path_;
  std::FILE* file_ = nullptr;
  double last_flush_ = 0;
};

}  // namespace tensorboard
