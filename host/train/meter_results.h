#pragma once
// What the loop keeps of its meters besides metrics.jsonl: each value's
// reading (when it was computed, for Loop::meter_readings()) and the meters'
// structured results (Meter::results()), written under RUN_DIR/meters/.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "train/components.h"
#include "trainyard/loop.h"
#include "trainyard/meter.h"

namespace trainyard::host {

/// Copies freshly computed meter `values` into the loop's latest values and
/// readings, stamped with the loop's epoch and iteration at that moment.
void take_meter_values(const MeterValues& values, int64_t epoch, int64_t iteration, MeterValues& latest,
                       std::map<std::string, MeterReading>& readings);

class Communicator;

/// A meter's whole state: its accumulators and, for an SDK 1.4 SampleMeter,
/// its rows (`sample_meter` says whether it is one).
struct MeterState {
  std::vector<double> accumulators;
  bool sample_meter = false;
  at::Tensor rows;
};
MeterState meter_state(const Built<Meter>& meter);
void set_meter_state(const Built<Meter>& meter, const MeterState& state);

/// Runs `read` (values(), results()) while the meter holds the state of
/// every rank: accumulators summed and, for an SDK 1.4 SampleMeter, rows
/// gathered in rank order; then gives the meter this rank's own state back.
/// Every rank calls it, in the same order. Without `comm` (one process) it
/// just runs `read`.
void with_all_ranks_state(const Built<Meter>& meter, Communicator* comm, const std::function<void()>& read);

/// Where a structured result of a test at (epoch, position, iteration) goes,
/// without the extension: RUN_DIR/meters/<name>-e<epoch> at an epoch's end
/// (position 0), RUN_DIR/meters/<name>-e<epoch>-i<iteration> in mid-epoch.
std::string meter_result_stem(const std::string& run_dir, const std::string& name, int64_t epoch, int64_t position,
                              int64_t iteration);

/// Writes every meter's results(): a table as <stem>.csv, a file as
/// <stem><extension>. Every rank calls it (results come from every rank's
/// state, as values() do: with_all_ranks_state); only when `write` is
/// true are files written. Returns the paths written.
std::vector<std::string> write_meter_results(const std::vector<Built<Meter>>& meters, const std::string& run_dir,
                                             int64_t epoch, int64_t position, int64_t iteration, Communicator* comm,
                                             bool write);

}  // namespace trainyard::host
