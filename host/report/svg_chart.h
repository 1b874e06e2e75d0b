#pragma once
// Line charts as self-contained SVG (no scripts, no fonts to fetch): the LR
// finder's loss curve and, later, the run report's plots.
#include <optional>
#include <string>
#include <vector>

namespace trainyard::host {

struct ChartSeries {
  std::string name;
  std::vector<double> x, y;  ///< same length; non-finite points are skipped
};

struct Chart {
  std::string title, x_label, y_label;
  bool log_x = false;
  std::vector<ChartSeries> series;
  std::optional<double> y_max;     ///< cap the y axis here (larger values run off the top)
  std::optional<double> marker_x;  ///< a dashed vertical line (e.g. the suggested value)
  std::string marker_label;
  std::string note;              ///< a line under the title (what the reader should know)
  std::vector<double> guides_x;  ///< light vertical lines (e.g. epoch boundaries)
  bool integer_x = false;        ///< x counts something (epochs): whole-number ticks only
};

/// The chart as an SVG document (UTF-8, well-formed XML).
std::string svg_line_chart(const Chart& chart);

/// Text made safe for XML content and attribute values.
std::string xml_escape(const std::string& text);

}  // namespace trainyard::host
