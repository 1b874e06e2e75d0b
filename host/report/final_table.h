#pragma once
// The end of a run on the console: a table that fits 80 columns instead of
// one line of every value (Lightning prints a table too).
#include <string>
#include <vector>

#include "formats/metrics.h"

namespace trainyard::host {

/// One row per quantity a meter reports (loss, accuracy_top1, recall_at_1):
/// its last train and test values and its best test value with the epoch of
/// that test (the least for names with "loss", else the greatest, as
/// stopping's `mode: auto` judges), from the run's `events`. The values
/// without a phase (lr, samples_per_sec, ...) follow on wrapped lines.
/// Every line has at most 80 columns.
std::string final_table(const NamedValues& last, const std::vector<MetricsEvent>& events);

}  // namespace trainyard::host
