#pragma once
// The run report: SVG charts of the logged values (output.plots, or loss,
// accuracy and learning rate by default) and one self-contained report.html
// with the plots, the final values, the plugins and provenance, and the
// resolved configuration. Written at the end of a run and by `trainyard report`.
#include <set>
#include <string>
#include <vector>

#include "config/experiment.h"

namespace trainyard::host {

/// Loss, accuracy and learning-rate charts from the value names a run logged.
std::vector<PlotSpec> default_plots(const std::set<std::string>& value_names);

/// Writes RUN_DIR/plots/NN-TITLE.svg and RUN_DIR/report.html from the run's
/// metrics.jsonl, summary.json, config.yaml and provenance.json (each may be
/// missing); returns the report's path. Throws trainyard::Error if RUN_DIR
/// holds no metrics.jsonl.
std::string write_report(const std::string& run_dir, const std::vector<PlotSpec>& plots);

/// A sweep's runs overlaid: for each test value (and train_loss) one chart
/// against the epoch with a line per run, in SWEEP_DIR/plots/ and
/// SWEEP_DIR/report.html. `runs` are (name, run directory); runs without a
/// metrics.jsonl yet are left out. Returns the report's path.
std::string write_sweep_report(const std::string& sweep_dir, const std::string& title,
                               const std::vector<std::pair<std::string, std::string>>& runs);

}  // namespace trainyard::host
