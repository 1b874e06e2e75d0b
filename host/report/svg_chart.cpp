#include "report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace trainyard::host {
namespace {

constexpr double kWidth = 720, kBaseHeight = 420;
constexpr double kLeft = 70, kRight = 20, kBaseTop = 40, kBaseBottom = 55;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string tick_text(double v) {
  char buf[32];
  if (v != 0 && (std::abs(v) < 1e-3 || std::abs(v) >= 1e5))
    std::snprintf(buf, sizeof buf, "%.0e", v);
  else
    std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Round tick values covering [lo, hi] (1, 2, 5 steps).
std::vector<double> linear_ticks(double lo, double hi) {
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> out;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
    out.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  return out;
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string svg_line_chart(const Chart& chart) {
  // The legend sits in rows below the plot, never over the lines.
  const bool legend = chart.series.size() > 1;
  size_t legend_rows = 0;
  std::vector<std::pair<double, double>> legend_at;  // x, row
  if (legend) {
    double x = kLeft;
    legend_rows = 1;
    for (const auto& s : chart.series) {
      const double w = 26 + 7.0 * double(s.name.size()) + 18;
      if (x + w > kWidth - kRight && x > kLeft) x = kLeft, ++legend_rows;
      legend_at.push_back({x, double(legend_rows - 1)});
      x += w;
    }
  }
  // The plot keeps its size; the note and the legend add to the picture's.
  const double kHeight = kBaseHeight + 20.0 * double(legend_rows) + (chart.note.empty() ? 0 : 16);
  const double kTop = kBaseTop + (chart.note.empty() ? 0 : 16);
  const double kBottom = kBaseBottom + 20.0 * double(legend_rows);
  auto tx = [&](double x) { return chart.log_x ? std::log10(x) : x; };
  auto usable = [&](double x, double y) { return std::isfinite(x) && std::isfinite(y) && (!chart.log_x || x > 0); };
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : chart.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (usable(s.x[i], s.y[i])) {
        x0 = std::min(x0, tx(s.x[i])), x1 = std::max(x1, tx(s.x[i]));
        y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
      }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;  // nothing to draw: empty axes
  if (chart.y_max && *chart.y_max > y0) y1 = std::min(y1, *chart.y_max);
  if (x1 - x0 < 1e-12) x0 -= 0.5, x1 += 0.5;
  // A constant series is drawn on an axis from zero to a quarter above it
  // (a rate of 0.05 on 0..0.06), not on a meaningless v-0.5..v+0.5.
  if (y1 - y0 < 1e-12) {
    const double v = y0;
    if (v > 0)
      y0 = 0, y1 = 1.25 * v;
    else if (v < 0)
      y0 = 1.25 * v, y1 = 0;
    else
      y0 = -1, y1 = 1;
  }
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad, y1 += pad;
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (tx(x) - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + (1 - (std::min(y, y1) - y0) / (y1 - y0)) * ph; };

  std::string svg =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
      num(kWidth) + "\" height=\"" + num(kHeight) + "\" viewBox=\"0 0 " + num(kWidth) + " " + num(kHeight) +
      "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"" +
      num(kWidth / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" + xml_escape(chart.title) + "</text>\n";
  if (!chart.note.empty())
    svg += "<text x=\"" + num(kWidth / 2) + "\" y=\"40\" text-anchor=\"middle\" font-size=\"11\" fill=\"#666\">" +
           xml_escape(chart.note) + "</text>\n";
  // Axes, grid and ticks.
  svg += "<g stroke=\"#ccc\" stroke-width=\"1\">\n";
  std::vector<std::pair<double, std::string>> xt, yt;
  if (chart.log_x) {
    for (double e = std::ceil(x0 - 1e-9); e <= x1 + 1e-9; e += 1)
      xt.push_back({std::pow(10.0, e), tick_text(std::pow(10.0, e))});
  } else {
    for (double t : linear_ticks(x0, x1))
      if (!chart.integer_x || std::abs(t - std::round(t)) < 1e-9) xt.push_back({t, tick_text(t)});
  }
  for (double t : linear_ticks(y0, y1)) yt.push_back({t, tick_text(t)});
  for (const auto& [v, _] : xt)
    svg += "<line x1=\"" + num(px(v)) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(px(v)) + "\" y2=\"" + num(kTop + ph) +
           "\"/>\n";
  for (const auto& [v, _] : yt)
    svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(py(v)) + "\" x2=\"" + num(kLeft + pw) + "\" y2=\"" +
           num(py(v)) + "\"/>\n";
  svg += "</g>\n<rect x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) +
         "\" fill=\"none\" stroke=\"#333\"/>\n";
  for (const auto& [v, text] : xt)
    svg += "<text x=\"" + num(px(v)) + "\" y=\"" + num(kTop + ph + 16) + "\" text-anchor=\"middle\">" +
           xml_escape(text) + "</text>\n";
  for (const auto& [v, text] : yt)
    svg += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(py(v) + 4) + "\" text-anchor=\"end\">" + xml_escape(text) +
           "</text>\n";
  svg += "<text x=\"" + num(kLeft + pw / 2) + "\" y=\"" + num(kTop + ph + 34) + "\" text-anchor=\"middle\">" +
         xml_escape(chart.x_label + (chart.log_x ? " (log scale)" : "")) + "</text>\n";
  svg += "<text transform=\"translate(16 " + num(kTop + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         xml_escape(chart.y_label) + "</text>\n";
  for (double g : chart.guides_x)
    if (usable(g, 0) && tx(g) >= x0 && tx(g) <= x1)
      svg += "<line class=\"guide\" x1=\"" + num(px(g)) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(px(g)) +
             "\" y2=\"" + num(kTop + ph) + "\" stroke=\"#bbb\" stroke-dasharray=\"2,3\"/>\n";
  // Series: one polyline each, broken where points are not finite; a dot on
  // every point of a short series (two test values make no visible line).
  const size_t kDotsUpTo = 40;
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const auto& s = chart.series[k];
    const char* color = kColors[k % (sizeof kColors / sizeof *kColors)];
    svg += "<g class=\"series\" data-name=\"" + xml_escape(s.name) + "\" fill=\"none\" stroke=\"" + color +
           "\" stroke-width=\"2\">\n";
    std::string points;
    auto flush = [&] {
      if (!points.empty()) svg += "<polyline points=\"" + points + "\"/>\n";
      points.clear();
    };
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!usable(s.x[i], s.y[i])) {
        flush();
        continue;
      }
      points += (points.empty() ? "" : " ") + num(px(s.x[i])) + "," + num(py(s.y[i]));
    }
    flush();
    svg += "</g>\n";
    size_t shown = 0;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) shown += usable(s.x[i], s.y[i]);
    if (shown <= kDotsUpTo) {
      svg += "<g class=\"dots\" fill=\"" + std::string(color) + "\">\n";
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
        if (usable(s.x[i], s.y[i]) && s.y[i] <= y1)
          svg += "<circle cx=\"" + num(px(s.x[i])) + "\" cy=\"" + num(py(s.y[i])) + "\" r=\"3.5\"/>\n";
      svg += "</g>\n";
    }
    if (legend) {
      const auto [lx, row] = legend_at[k];
      const double ly = kTop + ph + 46 + 20 * row;
      svg += "<g class=\"legend\"><line x1=\"" + num(lx) + "\" y1=\"" + num(ly - 4) + "\" x2=\"" + num(lx + 20) +
             "\" y2=\"" + num(ly - 4) + "\" stroke=\"" + color + "\" stroke-width=\"3\"/><text x=\"" + num(lx + 26) +
             "\" y=\"" + num(ly) + "\">" + xml_escape(s.name) + "</text></g>\n";
    }
  }
  if (chart.marker_x && usable(*chart.marker_x, 0)) {
    const double x = px(*chart.marker_x);
    svg += "<line x1=\"" + num(x) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(x) + "\" y2=\"" + num(kTop + ph) +
           "\" stroke=\"#555\" stroke-dasharray=\"5,4\"/>\n<text x=\"" + num(x + 4) + "\" y=\"" + num(kTop + 14) +
           "\">" + xml_escape(chart.marker_label) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace trainyard::host
